"""What one run's pieces cost on this device, measured: ``dw sweep NAME --dry-run --probe``'s
child process (sweep/probe.py spawns it, so the process start is measured too).

    python -m depthwidth.train.timing SPAWNED_AT STEPS OVERRIDES...

prints one JSON object, seconds each:

    start_s        from the parent's spawn to this process ready to train (interpreter, imports)
    setup_s        the trainer's set-up: data opened, model built (and wrapped: compile), run dir
    setup_again_s  a second run's set-up in the same process (a local worker's later runs): the
                   first's one-time costs (lazy imports, first data open) are not paid again
    first_s        the first optimizer steps' cost above the steady step (allocation, compile)
    step_s         one steady optimizer step: the median of the timed steps (at least STEPS and at
                   least MIN_TIMED_S seconds of them), each counted on its core: its wall time less
                   the time the training thread waited, runnable, for a core that another process
                   held (the kernel's run_delay, /proc/thread-self/schedstat; wall time where that
                   is not readable, and on a GPU), so a co-tenant's burst during the probe does not
                   price every step of the sweep; evaluations, gradient probe, entropy and analysis
                   are counted alike (one each), the checkpoint in wall time (it writes to disk)
    step_wall_s    the median wall time of the same steps
    waited         the share of the timed steps' wall time spent waiting for a core (0 without schedstat)
    steps_timed, timed_s  how many steps were timed, and their wall seconds
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

import gc
import json
import statistics
import sys
import tempfile
import time

WARM_STEPS = 2  # steps before the timed ones (their extra cost is first_s)
MIN_TIMED_S = 2.0  # timed steps go on until they took this long (a 9 ms step: ~220 of them) ...
MAX_TIMED_STEPS = 1000  # ... or this many
SCHEDSTAT = "/proc/thread-self/schedstat"  # on-CPU ns, run-queue wait ns, time slices (Linux)


def run_delay() -> float | None:
    """Seconds this thread has waited, runnable, for a core (None where the kernel does not say)."""
    try:
        with open(SCHEDSTAT) as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def on_core(wall: float, waited: float) -> float:
    """Seconds of ``wall`` the thread held a core (or did I/O): the wait for a core taken out."""
    return max(wall - waited, 0.0)


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

        cpu = tr.device.type == "cpu" and run_delay() is not None

        def clocked(fn) -> tuple:
            """``fn``'s wall seconds and the seconds of them its thread waited for a core."""
            if tr.device.type == "cuda":
                torch.cuda.synchronize(tr.device)
            d0 = run_delay() if cpu else 0.0
            t = time.perf_counter()
            out = fn()
            if isinstance(out, tuple):
                float(out[0])  # the step's loss on the host: its work is done
            if tr.device.type == "cuda":
                torch.cuda.synchronize(tr.device)
            wall = time.perf_counter() - t
            return wall, (run_delay() - d0 if cpu else 0.0)

        def timed(fn) -> float:  # on its core (module docstring)
            return on_core(*clocked(fn))

        warm = [timed(lambda: tr.train_step(lr, False)) for _ in range(WARM_STEPS)]
        walls: list = []
        waits: list = []
        while len(walls) < MAX_TIMED_STEPS and (len(walls) < max(1, steps) or sum(walls) < MIN_TIMED_S):
            w, d = clocked(lambda: tr.train_step(lr, False))
            walls.append(w)
            waits.append(d)
        step = statistics.median(map(on_core, walls, waits))
        evals = [timed(tr.evaluate) for _ in range(2)]
        probe = max(0.0, timed(lambda: tr.train_step(lr, True)) - step)
        with tr.autocast:
            entropy = timed(lambda: entropy_profile(tr.model, tr.entropy_batch))
        tr.state.step = 1
        ckpt = clocked(tr._checkpoint)[0]  # wall time: it writes to disk
        analysis_s = 0.0
        if cfg.train.analyze_at_end:
            analysis_s = timed(lambda: analysis.at_end(p.run_dir, lambda m: None, tr.device))
        device, threads = tr.device, torch.get_num_threads()
        tr = None  # a worker's next run: set up after this one ended, in the same process (memory freed)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        t0 = time.perf_counter()
        Trainer(prepare(compose([*overrides, f"run.dir={tmp}/again", "tracker=none"])), log=lambda m: None).setup()
        setup_again = time.perf_counter() - t0
    fpt = float(p.accounting["flops_per_token"])
    tps = p.tokens_per_step / step
    peak = peak_flops(device) or (PLAN_CPU_FLOPS if device.type == "cpu" else None)
    return {
        "start_s": None if spawned_at is None else ready - spawned_at,
        "setup_s": setup,
        "setup_again_s": setup_again,
        "first_s": max(0.0, sum(warm) - WARM_STEPS * step) + max(0.0, evals[0] - evals[1]),
        "step_s": step,
        "step_wall_s": statistics.median(walls),
        "waited": sum(waits) / sum(walls),
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
        "device": str(device),
        "threads": threads,
        "steps_timed": len(walls),
        "timed_s": sum(walls),
    }


def main(argv: list[str]) -> int:
    spawned, steps, *overrides = argv
    print(json.dumps(measure(overrides, int(steps), float(spawned))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
