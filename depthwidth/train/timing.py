"""What one run's pieces cost on this device, measured: ``dw sweep NAME --dry-run --probe``'s
child process (sweep/probe.py spawns it, so the process start is measured too).

    python -m depthwidth.train.timing SPAWNED_AT STEPS OVERRIDES...

prints one JSON object, seconds each:

    start_s        from the parent's spawn to this process ready to train (interpreter, imports)
    setup_s        the trainer's set-up: data opened, model built (and wrapped: compile), run dir
    first_s        the first optimizer steps' cost above the steady step (allocation, compile)
    step_s         one steady optimizer step (the median of STEPS timed steps)
    eval_s         one held-out evaluation (train.eval_batches batches)
    probe_s        a gradient-probe step's cost above a plain step
    entropy_s      one residual-stream entropy profile
    ckpt_s         one checkpoint save (hashed, renamed)
    analysis_s     train.analyze_at_end's analysis of the final checkpoint (0 when off)

and ``tokens_per_step``, ``flops_per_token``, ``tokens_per_s`` and ``mfu`` (of the device's peak:
the GPU's data sheet, or the plan's CPU figure per process) of the steady step.  The run trains
in a temporary directory, removed at the end; nothing of the sweep's store is touched.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time

WARM_STEPS = 2  # steps before the timed ones (their extra cost is first_s)


def measure(overrides: list[str], steps: int, spawned_at: float | None = None) -> dict:
    import torch

    from depthwidth.config.compose import compose
    from depthwidth.core.devices import PLAN_CPU_FLOPS
    from depthwidth.measure.inside import entropy_profile
    from depthwidth.train import analysis, optim
    from depthwidth.train.meter import peak_flops
    from depthwidth.train.plan import prepare
    from depthwidth.train.trainer import Trainer

    ready = time.time()
    with tempfile.TemporaryDirectory(prefix="dw-probe-") as tmp:
        cfg = compose([*overrides, f"run.dir={tmp}/run", "tracker=none"])
        t0 = time.perf_counter()
        tr = Trainer(prepare(cfg), log=lambda m: None)
        tr.setup()
        tr.clock = lambda: 0.0
        setup = time.perf_counter() - t0
        p = tr.prepared
        lr = optim.lr_at(0, p.steps, cfg.optim, p.tokens_per_step)

        def timed(fn) -> float:
            if tr.device.type == "cuda":
                torch.cuda.synchronize(tr.device)
            t = time.perf_counter()
            out = fn()
            if isinstance(out, tuple):
                float(out[0])  # the step's loss on the host: its work is done
            if tr.device.type == "cuda":
                torch.cuda.synchronize(tr.device)
            return time.perf_counter() - t

        warm = [timed(lambda: tr.train_step(lr, False)) for _ in range(WARM_STEPS)]
        step = statistics.median(timed(lambda: tr.train_step(lr, False)) for _ in range(max(1, steps)))
        evals = [timed(tr.evaluate) for _ in range(2)]
        probe = max(0.0, timed(lambda: tr.train_step(lr, True)) - step)
        with tr.autocast:
            entropy = timed(lambda: entropy_profile(tr.model, tr.entropy_batch))
        tr.state.step = 1
        ckpt = timed(tr._checkpoint)
        analysis_s = 0.0
        if cfg.train.analyze_at_end:
            t = time.perf_counter()
            analysis.at_end(p.run_dir, lambda m: None, tr.device)
            analysis_s = time.perf_counter() - t
    fpt = float(p.accounting["flops_per_token"])
    tps = p.tokens_per_step / step
    peak = peak_flops(tr.device) or (PLAN_CPU_FLOPS if tr.device.type == "cpu" else None)
    return {
        "start_s": None if spawned_at is None else ready - spawned_at,
        "setup_s": setup,
        "first_s": max(0.0, sum(warm) - WARM_STEPS * step) + max(0.0, evals[0] - evals[1]),
        "step_s": step,
        "eval_s": evals[1],
        "probe_s": probe,
        "entropy_s": entropy,
        "ckpt_s": ckpt,
        "analysis_s": analysis_s,
        "tokens_per_step": p.tokens_per_step,
        "flops_per_token": fpt,
        "tokens_per_s": tps,
        "flops_per_s": tps * fpt,
        "mfu": tps * fpt / peak if peak else None,
        "peak_flops": peak,
        "device": str(tr.device),
        "threads": torch.get_num_threads(),
        "steps_timed": max(1, steps),
    }


def main(argv: list[str]) -> int:
    spawned, steps, *overrides = argv
    print(json.dumps(measure(overrides, int(steps), float(spawned))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
