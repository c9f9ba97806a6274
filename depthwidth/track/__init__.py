"""Where runs are recorded: the run directory's JSONL files and the W&B mirror
(tracker.py), run tables from run directories (table.py) and from W&B
(wandb_table.py)."""
