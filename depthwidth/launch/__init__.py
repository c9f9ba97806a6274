"""Launchers: how a sweep's runs become jobs, and what the scheduler says about them.

Modules: config.py (launcher settings), submit.py (one submission, any
backend), task.py (inside a job: train a task's runs), retry.py (automatic
retries with a cap and a reason), followup.py (``--then``: fit and report once
every run has ended), halving.py (successive halving of tuning
groups), limits.py + waves.py (the queue's limits; a sweep larger than them
goes in as waves), backend.py (the ``Backend`` protocol and the one registry of
the backends: ``backend(name)``; nothing else compares launcher names),
debug.py / local.py + workers.py / slurm.py (what the backends run on; slurm.py
is the only module that runs SLURM's commands or imports submitit),
scheduler.py (the local task state files), status.py (``dw status``: manifest
+ run dirs + scheduler).
"""
