"""``dw train``: one run from Hydra overrides."""

from __future__ import annotations

from typing import List, Optional

import typer

from depthwidth.cli.render import console, emit_json


def train_cmd(
    overrides: Optional[List[str]] = typer.Argument(None, help="Hydra overrides, e.g. model.depth=4 train.steps=200"),
    as_json: bool = typer.Option(False, "--json", help="print the run's summary.json instead of a table"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress lines"),
) -> None:
    """Train one model; rerun with the same overrides to resume it.

    Example: dw train model=depth_delusion model.depth=4 model.width=128 model.shape=x
    data=pydoc optim.lr=3e-4 train.steps=200 train.batch_size=16 train.seq_len=128
    train.ckpt_every=50 run.dir=runs/try1 run.seed=42

    Exit codes: 0 done; 1 diverged or failed; 2 bad input; 3 preempted
    (checkpoint written; rerun or requeue to resume).
    """
    from depthwidth.config.compose import compose
    from depthwidth.train.trainer import EXIT_PREEMPTED, Preempted, train

    cfg = compose(overrides or [])
    err = console(stderr=True)
    say = lambda m: err.print(f"[dim]dw[/dim] {m}", markup=True, highlight=False)  # noqa: E731
    # --quiet drops progress lines but never a warning
    log = (lambda m: say(m) if m.startswith("warning:") else None) if quiet else say
    try:
        summary = train(cfg, log=log)
    except Preempted:
        raise typer.Exit(EXIT_PREEMPTED)
    except OSError as e:  # an uncreatable or read-only run directory, a full disk: say so, no traceback
        from depthwidth.core.errors import WorkFailed

        where = e.filename or cfg.run.dir or "the run directory"
        raise WorkFailed(f"cannot write {where}: {e.strerror or e}; every file written so far is whole, "
                         "so the same command resumes the run once it can write there") from None
    import os

    if os.environ.get("RANK", "0") != "0":
        pass  # data-parallel ranks > 0: rank 0 reports
    elif as_json:
        emit_json(summary)
    else:
        _render(summary)
    if summary["status"] != "done":
        raise typer.Exit(1)


def _render(s: dict) -> None:
    from rich.table import Table

    t = Table(title=f"run {s['run_id']} · {s['status']}", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    rows = [
        ("shape", f"{s['depth']}L × {s['width']} ({s['shape']}), widths {s['widths'] if len(set(s['widths'])) > 1 else s['width']}"),
        ("params (total)", f"{s['params']:,}"),
        ("tokens", f"{s['tokens']:,} of {s['tokens_total']:,} ({s['steps']} steps)"),
        ("final held-out loss", "—" if s["final_val_loss"] is None else f"{s['final_val_loss']:.4f} nats/token"),
    ]
    if s.get("bayes_loss") is not None:
        rows.append(("Bayes-optimal loss", f"{s['bayes_loss']:.4f} nats/token"))
    for b in s["budgets"]:
        rows.append((f"  at {b['tokens']:,} tokens", "—" if b["val_loss"] is None else f"{b['val_loss']:.4f}"))
    if s.get("reason"):
        rows.append(("reason", s["reason"]))
    rows.append(("wall time", f"{s['wall_time_s']:.1f} s on {s['device']}"))
    for k, v in rows:
        t.add_row(k, v)
    console().print(t)
