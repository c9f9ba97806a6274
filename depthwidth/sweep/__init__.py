"""Sweeps: ``sweeps/NAME.yaml`` -> validated runs -> submitted jobs.

    from depthwidth.sweep import plan, submit
    p = plan("depth_delusion", launcher="slurm")               # dry run: p.runs, p.sweep
    s = submit("demo", ["train.steps=50"], launcher="local")   # returns once queued: s.jobs

Modules: file.py (reading a sweep file into points), expand.py (points ->
composed, identified, validated runs), plan_costs.py (what the dry run says a
sweep costs: device-hours, requeues, nodes, calendar time, checkpoint disk),
submission.py (plan and submit).
"""

from depthwidth.sweep.submission import Submission, SweepPlan, plan, submit

__all__ = ["Submission", "SweepPlan", "plan", "submit"]
