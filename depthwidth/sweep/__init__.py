"""Sweeps: ``sweeps/NAME.yaml`` -> validated runs -> submitted jobs.

    from depthwidth.sweep import plan, submit
    p = plan("depth_delusion", launcher="slurm")               # dry run: p.runs, p.sweep
    s = submit("demo", ["train.steps=50"], launcher="local")   # returns once queued: s.jobs

Modules: file.py (reading a sweep file into points), expand.py (points ->
composed, identified, validated runs), plan_costs.py (what the dry run says a
sweep costs: device-hours, requeues, nodes, calendar time, checkpoint disk),
submission.py (plan and submit), options.py (``dw sweep``'s options, standard library only),
dry_run.py (the dry run's document, table and lines).

The names below are imported on first use: ``dw --help`` reads options.py without planning code.
"""

__all__ = ["Submission", "SweepPlan", "plan", "submit"]


def __getattr__(name: str):
    if name in __all__:
        from depthwidth.sweep import submission

        return getattr(submission, name)
    raise AttributeError(f"module 'depthwidth.sweep' has no attribute {name!r}")
