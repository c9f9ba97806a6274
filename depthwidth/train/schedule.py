"""When, in a run of S steps, something other than an optimiser step happens.

``Schedule.after(step)`` names what follows step ``step`` (1-based: the number
of steps done): a metrics line, a periodic evaluation, a budget's evaluation,
a checkpoint, a gradient probe on the step itself, an entropy profile.  ``branches_at(step)`` are
the WSD budgets whose decay branches fork before step ``step + 1`` is taken
(several can fork at one step: at step 0, or when (1 − f)·S_b rounds alike).
Pure bookkeeping, no torch: the loop asks, the trainer acts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from depthwidth.train.probes import is_probe_step


@dataclass(frozen=True)
class Events:
    log: bool
    evaluate: bool  # periodic (train.eval_every)
    budget: Any  # optim.Budget evaluated on the main run at this step, or None
    checkpoint: bool

    @property
    def needs_loss(self) -> bool:
        """Whether the pending losses must be synced (checked for NaN) here."""
        return self.log or self.evaluate or self.budget is not None or self.checkpoint


class Schedule:
    def __init__(self, train: Any, probe: Any, steps: int, budgets: Sequence):
        self.steps = steps
        self.log_every, self.eval_every = int(train["log_every"]), int(train["eval_every"])
        self.ckpt_every = int(train["ckpt_every"])
        self.probe_every, self.probe_at = int(probe["every"]), list(probe["at"])
        self.entropy_every = int(probe["entropy_every"])
        self._branches: dict = {}
        for b in budgets:
            if b.branch_at is not None:
                self._branches.setdefault(b.branch_at, []).append(b)
        self._evals = {b.steps: b for b in budgets if b.branch_at is None}

    def probe(self, step: int) -> bool:
        """Probe the gradients of step ``step`` (1-based)?"""
        return is_probe_step(step, self.probe_every, self.probe_at)

    def entropy(self, step: int) -> bool:
        """Record the entropy profile after step ``step``?"""
        return is_probe_step(step, self.entropy_every, ())

    def branches_at(self, done: int) -> list:
        return self._branches.get(done, [])

    def after(self, step: int) -> Events:
        last = step == self.steps
        return Events(
            log=step % self.log_every == 0 or last,
            evaluate=bool(self.eval_every) and step % self.eval_every == 0,
            budget=self._evals.get(step),
            checkpoint=bool(self.ckpt_every) and step % self.ckpt_every == 0,
        )
