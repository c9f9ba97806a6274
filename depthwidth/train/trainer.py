"""One training run, start to finish, resumable after any kill.

``prepare(cfg)`` validates everything and writes nothing (bad input exits 2
with nothing on disk); ``train(cfg)`` then owns the run directory:

    config.yaml    resolved config + run_id + accounting + provenance
    metrics.jsonl  one line per logged step (track.local.LocalTracker)
    probes.jsonl   per-layer gradient norms on probe steps
    summary.json   status running | done | diverged | failed | preempted
    ckpt/          checksummed checkpoints (checkpoint.py)

Rerunning on the same directory resumes from the newest valid checkpoint.  On
CPU a resumed run reproduces the uninterrupted one exactly: the model, the
optimiser, the data sampler and torch's RNG all come back from the checkpoint
(state.py), and history lines written after it are dropped before training
goes on.

The loop (``Trainer.run``) is a few lines; each concern is a piece of its
own: when to log/evaluate/checkpoint/probe (schedule.py), preemption signals
(signals.py), WSD decay branches (branch.py), NaN watch and throughput
(meter.py), the summary (summary.py).  SIGUSR2 / SIGTERM / SIGINT (Ctrl-C) make
the run finish its current step, write a checkpoint and raise ``Preempted``;
``dw train`` then exits with ``EXIT_PREEMPTED`` (3), which launchers treat as
"requeue me".  A second Ctrl-C soon after exits at once (130, summary.abandoned).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth.config.identity import run_id as config_run_id
from depthwidth.core import provenance
from depthwidth.core.atomic import write_text
from depthwidth.core.errors import BadInput, bad
from depthwidth.core.store import runs_root
from depthwidth.measure.inside import ENTROPY_PROBE_TOKENS, entropy_profile, eval_set
from depthwidth.model.accounting import account
from depthwidth.track.tracker import NullTracker, make_tracker
from depthwidth.train import analysis, checkpoint, dist, memory, optim, parallel
from depthwidth.train.branch import decay_branch
from depthwidth.train.meter import LossWatch, Throughput, describe_device, peak_flops
from depthwidth.train.plan import check, precision_for
from depthwidth.train.probes import GradProbe
from depthwidth.train.schedule import Schedule
from depthwidth.train.signals import Preempted, StopFlag
from depthwidth.train.state import TrainState, extra_state, restore
from depthwidth.train.summary import abandoned, summary_path, write_summary

EXIT_PREEMPTED = 3


@dataclass
class Plan:
    cfg: Any
    spec: Any
    source: Any
    run_id: str
    run_dir: Path
    steps: int
    tokens_per_step: int
    budgets: list
    device_type: str = "cpu"
    precision: str = "fp32"
    accounting: dict = field(default_factory=dict)


def prepare(cfg) -> Plan:
    """Validate the whole config and resolve what the run needs; write nothing.
    ``train.precision=auto`` is resolved here (bf16 on CUDA, else fp32): the
    precision is part of the run's identity, the device is not."""
    from depthwidth.data.source import make_source

    world = dist.world_from_env()
    rp = check(cfg, processes=world.size)
    t = cfg.train
    source = make_source(cfg.data, t.seq_len)
    if rp.spec.vocab_size != source.vocab_size:
        raise BadInput(
            f"vocabulary mismatch: model.vocab_size={rp.spec.vocab_size} but data {source.name!r} has {source.vocab_size} tokens"
        )
    device_type = _device_type(t.device)
    precision = precision_for(t.precision, device_type)
    if t.precision != precision:
        cfg.train.precision = precision
    rid = config_run_id(cfg)
    run_dir = Path(cfg.run.dir) if cfg.run.dir else runs_root() / "adhoc" / rid
    existing = _existing_run_id(run_dir)
    if existing is not None and existing != rid:
        raise BadInput(
            f"run.dir {str(run_dir)!r} holds run {existing} trained with a different config (this one is {rid}); "
            "choose another run.dir"
        )
    return Plan(cfg, rp.spec, source, rid, run_dir, rp.steps, rp.tokens_per_step, rp.budgets, device_type,
                precision, account(rp.spec, t.seq_len))


def _device_type(name: str) -> str:
    if name == "cpu":
        return "cpu"
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise bad("train.device", name, "auto|cpu (no CUDA device is visible)")
    return "cuda" if torch.cuda.is_available() else "cpu"


def _existing_run_id(run_dir: Path) -> str | None:
    p = run_dir / "config.yaml"
    if not p.exists():
        return None
    from omegaconf import OmegaConf

    try:
        rid = OmegaConf.load(p).get("run_id")
        return None if rid is None else str(rid)
    except Exception:
        return None


def train(cfg, *, handle_signals: bool = True, log=print, progress=None) -> dict:
    """Train (or resume, or find finished) the run ``cfg`` describes; returns its summary.
    ``progress``: ``begin(step, steps, tokens_per_step)`` once, ``update(step, loss)`` every
    step (it keeps its own pace)."""
    plan = prepare(cfg)
    if plan.spec.extra.get("warning"):
        log(f"warning: {plan.spec.extra['warning']}")
    sp = summary_path(plan.run_dir)
    if sp.exists():
        prev = json.loads(sp.read_text())
        if prev.get("status") in ("done", "diverged") and prev.get("run_id") == plan.run_id:
            log(f"run {plan.run_id} is already {prev['status']}; nothing to do")
            return prev
    return Trainer(plan, log, progress).run(handle_signals)


class Trainer:
    def __init__(self, plan: Plan, log, progress=None):
        self.p = plan
        self.cfg = plan.cfg
        self.world = dist.world_from_env()
        self.log = log if self.world.main else (lambda m: None)
        self.progress = progress if self.world.main else None
        self._saved_at = None  # the step of the newest checkpoint on disk (resumed from, or saved)
        self._wall = None  # seconds trained, once the loop runs

    # -- set-up ---------------------------------------------------------------
    def setup(self) -> None:
        import torch

        from depthwidth.model.gpt import VariableWidthGPT

        cfg, p, w = self.cfg, self.p, self.world
        if cfg.train.threads:
            torch.set_num_threads(int(cfg.train.threads))
        self.device = torch.device(p.device_type)
        if w.distributed and self.device.type == "cuda":
            self.device = torch.device("cuda", w.local_rank)
            torch.cuda.set_device(self.device)
        dist.init(w, self.device.type)  # several processes: before the layout, which all ranks must agree on
        self.layout = self._layout()
        dist.init(w, self.device.type, force=self.layout.mode == "fsdp")  # FSDP on one process: a group of one
        torch.manual_seed(int(cfg.run.seed))
        self.model = VariableWidthGPT(p.spec, cfg.train.seq_len).to(self.device)
        self.fwd = parallel.apply(self.model, self.layout.mode, self.device, p.precision, ac=self.layout.ac,
                                  compile=bool(cfg.train.compile))
        self.opt = optim.build_optimizer(self.model, cfg.optim)
        self.sampler = p.source.sampler("train", cfg.train.batch_size, cfg.train.seq_len, int(cfg.run.seed))
        self.val = [
            (torch.from_numpy(x).to(self.device), torch.from_numpy(y).to(self.device))
            for x, y in p.source.val_batches(cfg.train.batch_size, cfg.train.seq_len, cfg.train.eval_batches)
        ]
        self.probe = GradProbe(self.model, self.world)
        self.entropy_batch = torch.from_numpy(eval_set(p.source, cfg.train.seq_len, ENTROPY_PROBE_TOKENS)[0]).to(self.device)
        self.state = TrainState()
        path = self._latest_checkpoint()
        if path is not None:
            extra = checkpoint.load(path, self.model, self.opt)
            if extra.get("run_id") != p.run_id:
                raise BadInput(f"checkpoint in {p.run_dir}/ckpt belongs to run {extra.get('run_id')}, not {p.run_id}")
            self.state = restore(extra, self.sampler)
            self._saved_at = self.state.step
            self.log(f"resuming run {p.run_id} from step {self.state.step}")
        self.autocast = parallel.autocast(self.device, p.precision, self.layout.mode)
        self.provenance = provenance.record(device=describe_device(self.device), precision=p.precision,
                                            data=p.source.fingerprint)
        self._open_run_dir()

    def _layout(self) -> memory.Plan:
        """single | ddp | fsdp, micro-batch and activation checkpointing for this world and device."""
        import torch

        t, p, w = self.cfg.train, self.p, self.world
        cap = None
        if self.device.type == "cuda":  # the smallest device of the allocation, so every rank plans alike
            cap = int(-dist.mean(w, -torch.tensor(float(torch.cuda.get_device_properties(self.device).total_memory),
                                                  device=self.device), op="min"))
        lay = memory.layout(p.spec, seq_len=t.seq_len, batch_size=t.batch_size, world=w.size, parallel=t.parallel,
                            micro_batch=t.micro_batch_size, ac=t.activation_checkpointing, precision=p.precision,
                            device=self.device.type, capacity=cap,
                            wsd_branches=any(b.branch_at is not None for b in p.budgets))
        if not lay.fits:
            self.log(f"warning: the memory plan needs {lay.total / memory.GiB:.1f} GiB per device of "
                     f"{cap / memory.GiB:.1f} GiB; try {lay.advice}")
        self.log(f"layout: {w.size} process{'es' * (w.size > 1)}, {lay.mode}, micro-batch {lay.micro_batch} x "
                 f"{lay.accum}, activation checkpointing {'on' if lay.ac else 'off'}")
        return lay

    def _latest_checkpoint(self):
        """Every rank verifies a share of the files; all agree on the checkpoint to load."""
        return checkpoint.latest(self.p.run_dir / "ckpt", self.world, warn=lambda m: self.log(f"warning: {m}"))

    def _open_run_dir(self) -> None:
        from omegaconf import OmegaConf

        cfg, p, w = self.cfg, self.p, self.world
        doc = OmegaConf.to_container(cfg, resolve=True)
        doc["run_id"] = p.run_id
        doc["accounting"] = p.accounting
        doc["provenance"] = self.provenance
        p.run_dir.mkdir(parents=True, exist_ok=True)
        if w.main and not (p.run_dir / "config.yaml").exists():
            write_text(p.run_dir / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(doc)))
        self.tracker = make_tracker(cfg, p.run_dir, p.run_id, doc, log=self.log) if w.main else NullTracker()
        self.tracker.rewind(self.state.step)

    # -- pieces -----------------------------------------------------------------
    def _batch(self):
        import torch

        x, y = dist.rows(self.world, *map(torch.from_numpy, self.sampler.next()))
        return x.to(self.device), y.to(self.device)

    def train_step(self, lr: float, probe: bool):
        """One optimiser step; returns (loss, grad norm, per-layer probe or None) as tensors."""
        import torch

        optim.set_lr(self.opt, lr)
        x, y = self._batch()
        mb, k = self.layout.micro_batch, self.layout.accum
        total = 0.0
        for j in range(k):  # gradients are synchronised on the last micro-batch only
            with parallel.sync(self.fwd, self.layout.mode, last=j == k - 1):
                with self.autocast:
                    _, loss = self.fwd(x[j * mb:(j + 1) * mb], y[j * mb:(j + 1) * mb])
                (loss / k).backward()
            total = total + loss.detach()
        probes = self.probe() if probe else None
        if probes is not None and self.probe.moe:
            probes = {**probes, "router": self.probe.router()}
        clip = float(self.cfg.optim.grad_clip)
        params = [q for q in self.model.parameters() if q.grad is not None]
        gn = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        gn = gn.full_tensor() if hasattr(gn, "full_tensor") else gn  # FSDP: a DTensor over the shards
        return total / k, gn.detach(), probes

    def evaluate(self) -> float:
        """Mean held-out loss: each rank its rows of every batch, in micro-batches (as in training:
        a whole global batch at once would not fit), averaged over ranks."""
        import torch

        self.model.eval()
        mb = self.layout.micro_batch
        total = torch.zeros((), device=self.device)
        n = 0
        with torch.no_grad(), self.autocast:
            for x, y in self.val:
                x, y = dist.rows(self.world, x, y)
                for j in range(0, x.size(0), mb):
                    total += self.model(x[j:j + mb], y[j:j + mb])[1].float()
                    n += 1
        self.model.train()
        return float(dist.mean(self.world, total)) / max(1, n)

    def _record(self, b, loss: float) -> None:
        self.state.record(b, loss)
        self.log(f"budget {b.tokens:,} tokens (step {b.steps}): val loss {loss:.4f}")

    def _weights_finite(self) -> bool:
        """Checked before every checkpoint: a finite loss does not prove the last update was."""
        import torch

        sq = parallel.global_sq_norms(self.world, [q.detach() for q in self.model.parameters()])
        return bool(torch.isfinite(sq).all())

    def _save(self, wall: float) -> None:
        extra = extra_state(self.p.run_id, self.state, self.sampler, wall)
        checkpoint.save(self.p.run_dir / "ckpt", self.state.step, self.world, self.model, self.opt, extra,
                        keep=int(self.cfg.train.keep_ckpts))

    def _checkpoint(self, wall: float) -> dict | None:
        """Save, unless the weights went non-finite (then the run ends diverged: its summary)."""
        if not self._weights_finite():
            return self._end("diverged", wall, reason=f"non-finite weights after step {self.state.step}",
                             diverged_step=self.state.step)
        self.tracker.flush()
        self._save(wall)
        self._saved_at = self.state.step
        return None

    def _end(self, status: str, wall: float, **kw) -> dict:
        """Every way a run stops: history flushed, summary written, tracker closed."""
        self.tracker.flush()
        summary = write_summary(self, status, wall, **kw)
        self.tracker.finish(summary)
        return summary

    # -- the loop -------------------------------------------------------------
    def run(self, handle_signals: bool) -> dict:
        again = lambda: abandoned(self, self._wall and self._wall(), self._saved_at)  # noqa: E731  (2nd Ctrl-C)
        with StopFlag(handle_signals, on_again=again, escalate=not self.world.distributed) as stop:
            self.setup()  # a Ctrl-C while it loads: the run stops after its first step
            return self._loop(stop)

    def _loop(self, stop: StopFlag) -> dict:
        p, st = self.p, self.state
        t0 = time.perf_counter()
        wall = lambda: st.wall_before + time.perf_counter() - t0  # noqa: E731
        write_summary(self, "running", wall())
        self._wall = wall
        sched = Schedule(self.cfg.train, self.cfg.probe, p.steps, p.budgets)
        watch = LossWatch(self.world, st.last_finite)
        meter = Throughput(st.step * p.tokens_per_step, p.accounting["flops_per_token"], peak_flops(self.device))
        if self.progress:
            self.progress.begin(st.step, p.steps, p.tokens_per_step)
        try:
            while st.step < p.steps:
                out = self._step(sched, watch, meter, stop, wall)
                if out is not None:
                    return out
            ended = None if self._saved_at == st.step else self._checkpoint(wall())
            if ended is None and self.cfg.train.analyze_at_end and self.world.main:
                ended = self._end("done", wall())
                analysis.at_end(p.run_dir, self.log, self.device)  # from the final checkpoint, as dw analyze would
            return ended or self._end("done", wall())
        except (Preempted, BadInput):
            raise
        except Exception as e:
            self._end("failed", wall(), reason=f"{type(e).__name__}: {e}")
            raise
        finally:
            dist.shutdown(self.world)

    def _step(self, sched: Schedule, watch, meter, stop: StopFlag, wall) -> dict | None:
        """One step of the main run and whatever the schedule hangs on it; a summary if the run ended."""

        p, st = self.p, self.state
        for b in sched.branches_at(st.step):
            if b.steps not in st.steps_recorded:
                loss = decay_branch(self, b, stop)
                if loss is None:  # stopped inside the branch: it is checkpointed; now the main run at the fork
                    return self._preempt(stop, wall, f"in the decay branch to step {b.steps}")
                self._record(b, loss)
        lr = optim.lr_at(st.step, p.steps, self.cfg.optim, p.tokens_per_step)
        loss, gn, probes = self.train_step(lr, sched.probe(st.step + 1))
        st.step += 1
        watch.add(st.step, loss)
        if st.step >= p.steps:
            stop.clear()  # the run is complete: finish it rather than requeue it
        self.stop_agreed(stop)
        ev = sched.after(st.step)
        if ev.needs_loss or stop.requested:
            bad_step = watch.first_bad_step()
            st.last_finite = watch.last_finite
            if bad_step is not None:
                self.log(f"diverged at step {bad_step} (last finite loss {st.last_finite})")
                return self._end("diverged", wall(), reason=f"non-finite loss at step {bad_step}",
                                 diverged_step=bad_step)
        tokens = st.step * p.tokens_per_step
        rec = {"grad_norm": probes} if probes is not None else {}
        if rec and "router" in probes:
            rec["router"] = probes.pop("router")
        if sched.entropy(st.step):  # every rank runs the forward (FSDP gathers); rank 0 records
            with self.autocast:
                rec["entropy"] = entropy_profile(self.model, self.entropy_batch)
        if rec:
            self.tracker.log_probe({"step": st.step, "tokens": tokens, **rec})
        if ev.log or ev.evaluate:
            row = {"step": st.step, "tokens": tokens, "loss": st.last_finite, "lr": lr, "grad_norm": float(gn),
                   **meter.row(tokens), **meter.memory(self.device)}
            if ev.evaluate:
                row["val_loss"] = self.evaluate()
            self.tracker.log(row)
        if ev.budget is not None and ev.budget.steps not in st.steps_recorded:
            self._record(ev.budget, self.evaluate())
        if ev.log:
            self.tracker.flush()
        if self.progress:
            self.progress.update(st.step, st.last_finite)
        if ev.checkpoint:
            ended = self._checkpoint(wall())
            if ended is not None:
                return ended
        if stop.requested:
            return self._preempt(stop, wall)
        return None

    def stop_agreed(self, stop: StopFlag) -> bool:
        """Whether to stop after this step; every rank stops at the same step (StopFlag.agree)."""
        return stop.agree(self.world, self.device)

    def _preempt(self, stop: StopFlag, wall, where: str = ""):
        """Checkpoint (unless this step's is on disk), write the summary, raise ``Preempted``."""
        step = self.state.step
        if self._saved_at != step and (ended := self._checkpoint(wall())) is not None:
            return ended  # diverged
        e = Preempted(stop.name, step, where)
        if stop.name != "SIGINT":  # Ctrl-C: whoever called train() says it in one line (signals.interrupted_line)
            self.log(f"{stop.name}: checkpointed at step {step}{f' ({where})' if where else ''}; exiting for requeue")
        self._end("preempted", wall(), reason=str(e))
        raise e

