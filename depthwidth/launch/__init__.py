"""Launchers: how a sweep's runs become jobs, and what the scheduler says about them.

Modules: config.py (launcher settings), submit.py (one submission, any
backend), task.py (inside a job: train a task's runs), debug.py / local.py /
slurm.py (the backends; only slurm.py imports submitit), scheduler.py (the
scheduler's view), status.py (``dw status``: manifest + run dirs + scheduler).
"""
