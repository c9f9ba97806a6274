"""One training run, start to finish, resumable after any kill.

``plan.prepare(cfg)`` validates everything and writes nothing (bad input exits 2
with nothing on disk); ``train(cfg)`` then owns the run directory:

    config.yaml    resolved config + run_id + accounting + provenance
    metrics.jsonl  one line per logged step (track.tracker.LocalTracker)
    probes.jsonl   per-layer gradient norms on probe steps
    summary.json   status running | done | diverged | failed | preempted
    ckpt/          checksummed checkpoints (checkpoint.py)

Rerunning on the same directory resumes from the newest valid checkpoint.  On
CPU a resumed run reproduces the uninterrupted one exactly: the model, the
optimiser, the data sampler and torch's RNG all come back from the checkpoint
(state.py), and history lines written after it are dropped before training
goes on.

``Trainer`` declares all it holds; its loop is a few lines, each concern a piece:
when to log/evaluate/checkpoint/probe (schedule.py), stop signals (signals.py),
WSD decay branches (``_decay_branch``), NaN watch and throughput (meter.py).  A
run ends one way: set-up and loop give an ``Ending`` (summary.py: done, diverged,
preempted, or failed on any error, set-up's included) and ``_end`` writes the
summary, then returns it or raises the ending's error.  SIGUSR2 / SIGTERM /
SIGINT make the run finish its step, checkpoint and raise ``Preempted``; ``dw
train`` exits ``EXIT_PREEMPTED`` (3), which launchers take as "requeue me".  A
second Ctrl-C soon after exits at once (130, ``RunSummary.abandoned``).
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from typing import TYPE_CHECKING, Any, Callable

from depthwidth.config.node import RunConfig, plain
from depthwidth.core import provenance
from depthwidth.core.atomic import json_default, write_text
from depthwidth.core.errors import BadInput
from depthwidth.core.store import read_json_why
from depthwidth.measure.inside import ENTROPY_PROBE_TOKENS, entropy_profile, eval_set
from depthwidth.track.tracker import NullTracker, make_tracker
from depthwidth.train import analysis, checkpoint, dist, hostmem, memory, optim, parallel
from depthwidth.train import state as state_mod
from depthwidth.train.meter import LossWatch, Throughput, describe_device, peak_flops
from depthwidth.train.plan import PreparedRun, data_warning, prepare
from depthwidth.train.probes import GradProbe
from depthwidth.train.schedule import Schedule
from depthwidth.train.signals import Preempted, StopFlag
from depthwidth.train.state import TrainState, extra_state, restore
from depthwidth.train.summary import Ending, RunSummary, summary_path

if TYPE_CHECKING:
    import torch

    from depthwidth.data.base import Sampler
    from depthwidth.model.gpt import VariableWidthGPT
    from depthwidth.track.tracker import Tracker

EXIT_PREEMPTED = 3
FINAL = ("done", "diverged", "pruned")  # a run that ended so is never trained again
GATE = ("go", "park", "prune")  # what successive halving's gate may say (its index is what ranks agree on)


class Parked(Exception):
    """Successive halving: the run checkpointed at its first budget and waits for its group's
    decision (summary ``waiting``); whoever called train() parks it (launch/halving.py)."""

    def __init__(self, step: int, tokens: int):
        self.step, self.tokens = step, tokens
        super().__init__(f"waiting at step {step} for its tuning group's decision at {tokens:,} tokens")


def train(cfg: RunConfig, *, handle_signals: bool = True, log=print, progress=None, gate=None) -> dict:
    """Train (or resume, or find finished) the run ``cfg`` (config.compose's typed run config)
    describes; returns its summary.
    ``progress``: ``begin(step, steps, tokens_per_step)`` once, ``update(step, loss)`` every
    step (it keeps its own pace).  ``gate``: successive halving's say on this run (launch/halving.py):
    called with the run's first budget result, once it has one, it answers ``go``, ``park`` (checkpoint,
    end ``waiting`` and raise ``Parked``: the group has not decided yet) or ``prune`` (end ``pruned``)."""
    run = prepare(cfg)
    if run.spec.extra.get("warning"):
        log(f"warning: {run.spec.extra['warning']}")
    if said := data_warning(run.steps * run.tokens_per_step, run.source):
        log(f"warning: {said}")
    sp = summary_path(run.run_dir)
    prev, unreadable = read_json_why(sp)
    if unreadable:  # cut short, bytes that are not JSON: the run's checkpoint says where it is (done: at once)
        log(f"warning: {sp} is unreadable ({unreadable}): rewritten from the run's newest checkpoint")
    elif prev and prev.get("status") in FINAL and prev.get("run_id") == run.run_id:
        log(f"run {run.run_id} is already {prev['status']}; nothing to do")
        return prev
    return Trainer(run, log, progress, gate).run(handle_signals)


class Trainer:
    """Everything one run holds, declared here; ``setup()`` builds the part that needs torch."""

    prepared: PreparedRun  # the validated config, its data, run id and directory
    cfg: RunConfig  # prepared.cfg: the composed, typed run config
    world: dist.World
    log: Callable[[str], None]  # rank 0's lines (the other ranks say nothing)
    progress: Any  # rank 0's live display (begin/update), or None
    summary: RunSummary  # summary.json; set-up adds the device, provenance and memory plan
    state: TrainState  # the step, budget results, last finite loss: what a checkpoint restores
    saved_at: int | None  # the step of the newest checkpoint on disk (resumed from, or saved)
    clock: Callable[[], float] | None  # seconds trained, earlier attempts included, once the loop runs
    tracker: Tracker | NullTracker  # metrics.jsonl, probes.jsonl, the W&B mirror (rank 0, once the dir is open)
    carried: dict  # the history lines the checkpoint resumed from holds (the tracker's rewind restores them)
    gate: Callable[[dict], str] | None  # successive halving (train()'s gate), asked once per attempt
    # built by setup()
    device: torch.device
    layout: memory.MemoryPlan  # single | ddp | fsdp, micro-batches, activation checkpointing
    model: VariableWidthGPT
    fwd: Callable  # the model as parallel.apply wrapped it (DDP, FSDP, compiled): what training calls
    opt: torch.optim.Optimizer
    sampler: Sampler  # the deterministic training token stream
    val: list  # held-out (x, y) batches on the device
    probe: GradProbe  # per-layer gradient norms, MoE router load
    entropy_batch: torch.Tensor  # the fixed held-out rows of the entropy probe
    autocast: Any  # the precision's autocast context

    def __init__(self, run: PreparedRun, log, progress=None, gate=None):
        self.prepared, self.cfg = run, run.cfg
        self.world = dist.world_from_env()
        self.log = log if self.world.main else (lambda m: None)
        self.progress = progress if self.world.main else None
        self.summary = RunSummary(run, writes=self.world.main)
        self.state = TrainState()
        self.saved_at = None
        self.clock = None
        self.tracker = NullTracker()
        self.carried = {}
        self.gate = gate

    # -- set-up ---------------------------------------------------------------
    def setup(self) -> None:
        import torch

        from depthwidth.model.gpt import VariableWidthGPT

        cfg, p, w = self.cfg, self.prepared, self.world
        if cfg.train.threads:
            torch.set_num_threads(int(cfg.train.threads))
        self.device = torch.device(p.device_type)
        if self.device.type == "cpu":  # a step's big tensors are not page-faulted in again every step
            hostmem.hold_freed_memory()
        if w.distributed and self.device.type == "cuda":
            self.device = torch.device("cuda", w.local_rank)
            torch.cuda.set_device(self.device)
        self.summary.device = str(self.device)
        self.summary.provenance = provenance.record(
            device=describe_device(self.device), precision=p.precision, data=p.source.fingerprint
        )
        dist.init(w, self.device.type)  # several processes: before the layout, which all ranks must agree on
        self.layout = self._layout()
        self.summary.memory_plan = self.layout.to_dict()
        dist.init(w, self.device.type, force=self.layout.mode == "fsdp")  # FSDP on one process: a group of one
        torch.manual_seed(int(cfg.run.seed))
        self.model = VariableWidthGPT(p.spec, cfg.train.seq_len).to(self.device)
        self.fwd = parallel.apply(
            self.model, self.layout.mode, self.device, p.precision, ac=self.layout.ac, compile=bool(cfg.train.compile)
        )
        self.opt = optim.build_optimizer(self.model, cfg.optim)
        self.sampler = p.source.sampler("train", cfg.train.batch_size, cfg.train.seq_len, int(cfg.run.seed))
        self.val = [
            (torch.from_numpy(x).to(self.device), torch.from_numpy(y).to(self.device))
            for x, y in p.source.val_batches(cfg.train.batch_size, cfg.train.seq_len, cfg.train.eval_batches)
        ]
        self.probe = GradProbe(self.model, self.world)
        rows = eval_set(p.source, cfg.train.seq_len, ENTROPY_PROBE_TOKENS)[0]
        self.entropy_batch = torch.from_numpy(rows).to(self.device)
        path = self._latest_checkpoint(p.run_dir / "ckpt")
        if path is not None:
            extra = checkpoint.load(path, self.model, self.opt)
            if extra.get("run_id") != p.run_id:
                raise BadInput(f"checkpoint in {p.run_dir}/ckpt belongs to run {extra.get('run_id')}, not {p.run_id}")
            self.state = restore(extra, self.sampler)
            self.carried = json.loads(extra.get("history") or "{}")
            self.saved_at = self.state.step
            self.log(f"resuming run {p.run_id} from step {self.state.step}")
            self._resumed(extra)
        self.autocast = parallel.autocast(self.device, p.precision, self.layout.mode)
        self._open_run_dir()

    def setting(self) -> dict:
        """What a resume must match to train on exactly as this process would (checkpoints record it)."""
        import torch

        lay = self.layout
        return {
            "processes": self.world.size,
            "layout": f"{lay.mode} {lay.micro_batch}x{lay.accum}{' AC' if lay.ac else ''}",
            "device": self.device.type,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
        }

    def _resumed(self, extra: dict, where: str | None = None) -> None:
        """A checkpoint written under another setting (world size, layout, device, threads, torch):
        the run goes on, says so in one line and in its summary's ``resume_notes``."""
        saved = json.loads(extra.get("setting") or "{}")
        step = where or str(self.state.step)
        for note in state_mod.resume_notes(saved, self.setting(), step):
            self.state.resumed_differently.append(note)
            self.log(f"warning: {note}")

    def _layout(self) -> memory.MemoryPlan:
        """single | ddp | fsdp, micro-batch and activation checkpointing for this world and device."""
        import torch

        t, p, w = self.cfg.train, self.prepared, self.world
        cap = None
        if self.device.type == "cuda":  # the smallest device of the allocation, so every rank plans alike
            cap = int(dist.smallest(w, torch.cuda.get_device_properties(self.device).total_memory, self.device))
        lay = memory.layout(
            p.spec,
            seq_len=t.seq_len,
            batch_size=t.batch_size,
            world=w.size,
            parallel=t.parallel,
            micro_batch=t.micro_batch_size,
            ac=t.activation_checkpointing,
            precision=p.precision,
            device=self.device.type,
            capacity=cap,
            wsd_branches=any(b.branch_at is not None for b in p.budgets),
        )
        if not lay.fits:
            self.log(
                f"warning: the memory plan needs {lay.total / memory.GiB:.1f} GiB per device of "
                f"{cap / memory.GiB:.1f} GiB; try {lay.advice}"
            )
        self.log(
            f"layout: {w.size} process{'es' * (w.size > 1)}, {lay.mode}, micro-batch {lay.micro_batch} x "
            f"{lay.accum}, activation checkpointing {'on' if lay.ac else 'off'}"
        )
        return lay

    def _latest_checkpoint(self, d):
        """Every rank verifies a share of the files; all agree on the checkpoint to load."""
        return checkpoint.latest(d, self.world, warn=lambda m: self.log(f"warning: {m}"))

    def _open_run_dir(self) -> None:
        from omegaconf import OmegaConf

        cfg, p, w = self.cfg, self.prepared, self.world
        doc = plain(cfg)
        doc["run_id"] = p.run_id
        doc["accounting"] = p.accounting
        doc["provenance"] = self.summary.provenance
        p.run_dir.mkdir(parents=True, exist_ok=True)
        if w.main and not (p.run_dir / "config.yaml").exists():
            write_text(p.run_dir / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(doc)))
        self.tracker = make_tracker(cfg, p.run_dir, p.run_id, doc, log=self.log) if w.main else NullTracker()
        for note in self.tracker.rewind(self.state.step, self.carried):  # a torn last line: repaired, said
            self.log(f"warning: {note}")

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
                    _, loss = self.fwd(x[j * mb : (j + 1) * mb], y[j * mb : (j + 1) * mb])
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
                    total += self.model(x[j : j + mb], y[j : j + mb])[1].float()
                    n += 1
        self.model.train()
        return float(dist.mean(self.world, total)) / max(1, n)

    def _decay_branch(self, budget, stop: StopFlag) -> float | None:
        """A WSD decay branch (one run, several decayed points): at ``budget.branch_at`` the model,
        optimiser, data stream and RNG are copied, the copy decays to ``budget.steps`` and its
        held-out loss is returned; the main run goes on from the fork as if it had never branched.
        A stop inside (a branch can outlast a scheduler's warning): the branch is checkpointed in
        ``ckpt/branch_<steps>/``, the trainer put back at the fork, None returned; a resumed run
        reaching the fork continues the branch from that checkpoint, as if never interrupted."""
        import torch

        model_state = {k: v.clone() for k, v in self.model.state_dict().items()}
        opt_state = copy.deepcopy(self.opt.state_dict())
        sampler_state = copy.deepcopy(self.sampler.state_dict())
        rng = torch.get_rng_state()
        p, start = self.prepared, self.state.step
        d = p.run_dir / "ckpt" / f"branch_{budget.steps:08d}"
        path = self._latest_checkpoint(d)
        try:
            if path is not None:
                extra = checkpoint.load(path, self.model, self.opt)
                start = restore(extra, self.sampler).step
                self.log(f"resuming the decay branch to step {budget.steps} at step {start}")
                self._resumed(extra, f"{start} of the decay branch to step {budget.steps}")
            for s in range(start, budget.steps):
                lr = optim.lr_at(s, budget.steps, self.cfg.optim, p.tokens_per_step, p.steps)  # the trunk's warm-up
                self.train_step(lr, probe=False)
                if s + 1 < budget.steps and stop.agree(self.world, self.device):  # the last step: finish it
                    extra = extra_state(p.run_id, TrainState(step=s + 1), self.sampler, 0.0, self.setting())
                    checkpoint.save(d, s + 1, self.world, self.model, self.opt, extra, keep=1)
                    return None
            loss = self.evaluate()
        finally:
            self.model.load_state_dict(model_state)
            self.opt.load_state_dict(opt_state)
            self.sampler.load_state_dict(sampler_state)
            torch.set_rng_state(rng)
        if self.world.main:  # done: a later resume that reaches the fork again simply retrains it
            shutil.rmtree(d, ignore_errors=True)
        return loss

    def _record(self, b, loss: float) -> None:
        self.state.record(b, loss)
        self.log(f"budget {b.tokens:,} tokens (step {b.steps}): val loss {loss:.4f}")

    def _weights_finite(self) -> bool:
        """Checked before every checkpoint: a finite loss does not prove the last update was."""
        import torch

        sq = parallel.global_sq_norms(self.world, [q.detach() for q in self.model.parameters()])
        return bool(torch.isfinite(sq).all())

    def _checkpoint(self) -> Ending | None:
        """Save, unless the weights went non-finite: then the run ends diverged."""
        st = self.state
        if not self._weights_finite():
            return Ending("diverged", f"non-finite weights after step {st.step}", {"diverged_step": st.step})
        self.tracker.flush()
        extra = extra_state(self.prepared.run_id, st, self.sampler, self.clock(), self.setting())
        extra["history"] = json.dumps(self.tracker.unsaved(), default=json_default)  # what a torn line loses
        checkpoint.save(
            self.prepared.run_dir / "ckpt",
            st.step,
            self.world,
            self.model,
            self.opt,
            extra,
            keep=int(self.cfg.train.keep_ckpts),
        )
        self.tracker.saved()
        self.saved_at = st.step
        return None

    # -- the run --------------------------------------------------------------
    def run(self, handle_signals: bool) -> dict:
        """Set up and train; every ending goes through ``_end``."""
        with StopFlag(handle_signals, on_again=self._interrupted_again, escalate=not self.world.distributed) as stop:
            try:
                summary = self._end(self._attempt(stop))
                if summary["status"] == "done" and self.cfg.train.analyze_at_end and self.world.main:
                    # from the final checkpoint, as dw analyze would
                    analysis.at_end(self.prepared.run_dir, self.log, self.device)
                # every rank ends here before any tears its process group down: a rank that left
                # while a peer still wrote its summary was seen to abort in gloo at exit
                dist.barrier(self.world)
                return summary
            finally:
                dist.shutdown(self.world)

    def _attempt(self, stop: StopFlag) -> Ending:
        """Set-up and the loop; any error but bad input ends the run ``failed``."""
        try:
            self.setup()  # a Ctrl-C while it loads: the run stops after its first step
            return self._loop(stop)
        except BadInput:
            raise  # one line, exit 2: the input is wrong, the run did not fail
        except Exception as e:
            return Ending("failed", f"{type(e).__name__}: {e}", error=e)

    def _end(self, ending: Ending) -> dict:
        """History flushed, summary written, tracker closed; then ``ending.error`` raised, if any."""
        wall = self.clock() if self.clock else self.state.wall_before  # set-up failed: earlier attempts' only
        try:
            self.tracker.flush()
            summary = self.summary.write(ending.status, self.state, wall, ending.reason, **ending.extra)
            self.tracker.finish(summary)
        except Exception:
            if ending.error is None:
                raise
            raise ending.error  # recording a failure failed too (a full disk): report the failure itself
        if ending.error is not None:
            raise ending.error
        return summary

    def _interrupted_again(self) -> str:
        """A second Ctrl-C (StopFlag's on_again): the summary written, the line to print."""
        return self.summary.abandoned(self.state, self.clock and self.clock(), self.saved_at)

    def _loop(self, stop: StopFlag) -> Ending:
        p, st = self.prepared, self.state
        t0 = time.perf_counter()
        self.clock = lambda: st.wall_before + time.perf_counter() - t0
        self.summary.write("running", st, self.clock())
        sched = Schedule(self.cfg.train, self.cfg.probe, p.steps, p.budgets)
        watch = LossWatch(self.world, st.last_finite)
        meter = Throughput(st.step * p.tokens_per_step, p.accounting["flops_per_token"], peak_flops(self.device))
        if self.progress:
            self.progress.begin(st.step, p.steps, p.tokens_per_step)
        if (ending := self._halving()) is not None:  # resumed past the first budget: the group's decision
            return ending
        while st.step < p.steps:
            if (ending := self._step(sched, watch, meter, stop)) is not None:
                return ending
        if self.saved_at != st.step and (ending := self._checkpoint()) is not None:
            return ending  # diverged in the last steps
        return Ending("done")

    def _step(self, sched: Schedule, watch, meter, stop: StopFlag) -> Ending | None:
        """One step of the main run and whatever the schedule hangs on it; an Ending if the run ended."""
        p, st = self.prepared, self.state
        for b in sched.branches_at(st.step):
            if b.steps not in st.steps_recorded:
                loss = self._decay_branch(b, stop)
                if loss is None:  # stopped inside the branch: it is checkpointed; now the main run at the fork
                    return self._stop(stop, f"in the decay branch to step {b.steps}")
                self._record(b, loss)
                if (ending := self._halving()) is not None:
                    return ending
        lr = optim.lr_at(st.step, p.steps, self.cfg.optim, p.tokens_per_step)
        loss, gn, probes = self.train_step(lr, sched.probe(st.step + 1))
        st.step += 1
        watch.add(st.step, loss)
        if st.step >= p.steps:
            stop.clear()  # the run is complete: finish it rather than requeue it
        stop.agree(self.world, self.device)  # every rank stops at the same step
        ev = sched.after(st.step)
        if ev.needs_loss or stop.requested:
            bad_step = watch.first_bad_step()
            st.last_finite = watch.last_finite
            if bad_step is not None:
                self.log(f"diverged at step {bad_step} (last finite loss {st.last_finite})")
                return Ending("diverged", f"non-finite loss at step {bad_step}", {"diverged_step": bad_step})
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
            row = {
                "step": st.step,
                "tokens": tokens,
                "loss": st.last_finite,
                "lr": lr,
                "grad_norm": float(gn),
                **meter.row(tokens),
                **meter.memory(self.device),
            }
            if ev.evaluate:
                row["val_loss"] = self.evaluate()
            self.tracker.log(row)
        if ev.budget is not None and ev.budget.steps not in st.steps_recorded:
            self._record(ev.budget, self.evaluate())
            if (ending := self._halving()) is not None:
                return ending
        if ev.log:
            self.tracker.flush()
        if self.progress:
            self.progress.update(st.step, st.last_finite)
        if ev.checkpoint and (ending := self._checkpoint()) is not None:
            return ending
        if stop.requested:
            return self._stop(stop)
        return None

    def _halving(self) -> Ending | None:
        """Successive halving: once the run has its first budget's result, the gate says (once per
        attempt) whether it goes on, waits for its group (checkpointed, ``waiting``) or stops ``pruned``."""
        st, p = self.state, self.prepared
        if self.gate is None or not st.results:
            return None
        gate, self.gate = self.gate, None
        first = st.results[0]
        said = gate(first) if self.world.main else "go"  # rank 0 asks; every rank acts alike
        if said not in GATE:
            raise ValueError(f"halving gate said {said!r} ({' | '.join(GATE)})")
        action = GATE[int(dist.largest(self.world, GATE.index(said), self.device))]
        if action == "go":
            return None
        if action == "prune":
            self.log(f"pruned: the worse half of its tuning group at {first['tokens']:,} tokens")
            left = optim.planned_steps(p.steps, p.budgets) - optim.trained_steps(st.step, st.steps_recorded, p.budgets)
            return Ending(
                "pruned",
                f"successive halving: the worse half of its tuning group at {first['tokens']:,} tokens",
                {"flops_saved": left * p.tokens_per_step * float(p.accounting["flops_per_token"])},
            )
        if self.saved_at != st.step and (ending := self._checkpoint()) is not None:
            return ending  # diverged
        self.log(f"waiting at step {st.step} for its tuning group's decision at {first['tokens']:,} tokens")
        e = Parked(st.step, int(first["tokens"]))
        return Ending("waiting", str(e), error=e)

    def _stop(self, stop: StopFlag, where: str = "") -> Ending:
        """A stop signal: checkpoint (unless this step's is on disk), then end ``preempted``."""
        step = self.state.step
        if self.saved_at != step and (ending := self._checkpoint()) is not None:
            return ending  # diverged
        e = Preempted(stop.name, step, where)
        if stop.name != "SIGINT":  # Ctrl-C: whoever called train() says it in one line (signals.interrupted_line)
            self.log(f"{stop.name}: checkpointed at step {step}{f' ({where})' if where else ''}; exiting for requeue")
        return Ending("preempted", str(e), error=e)
