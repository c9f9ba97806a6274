"""Where runs are recorded: the run directory's JSONL files and the W&B mirror
(tracker.py), and where a command's runs come from (run_source.py: a sweep's run
directories, a table file or W&B, and the run table they make)."""
