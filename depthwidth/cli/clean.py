"""``dw clean``: delete the checkpoints of a sweep's finished runs and say how much disk that freed."""

from __future__ import annotations

import typer

from depthwidth.report.render import console, emit_json, wide_console


def clean_cmd(
    name: str = typer.Argument(..., help="sweep name (runs/NAME/manifest)"),
    keep: str = typer.Option(
        "final", "--keep", help="final: each done run's newest valid checkpoint stays | none: all of them go"
    ),
    force: bool = typer.Option(
        False, "--force", help="with --keep none: also a final checkpoint that analyze or eval still needs"
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="say what would be deleted; delete nothing"),
    as_json: bool = typer.Option(False, "--json", help="one JSON document instead of the table"),
) -> None:
    """Delete checkpoints of a sweep's done runs to free disk; other runs are left alone.

    Example: dw clean mydocs --dry-run

    Example: dw clean mydocs                 (keeps each done run's final checkpoint)

    Example: dw clean mydocs --keep none --force

    --keep none: a run whose train.analyze_at_end or train.eval_tasks has no result yet keeps its final
    checkpoint (the table says which); --force deletes that too.

    Only runs dw status shows done are touched: pending, running, preempted, failed, cancelled, lost,
    diverged and unknown runs keep every checkpoint.  The final checkpoint is the one dw analyze,
    dw eval and dw export load (the newest that verifies).  Each checkpoint is renamed to
    ckpt/.deleting-step_N before it is removed, so a crash never leaves half a checkpoint; the next
    dw clean finishes such leftovers.
    """
    from depthwidth.sweep.clean import clean, size_text, summary_line

    res = clean(name, keep, force, dry_run)
    if as_json:
        emit_json(res)
        return
    from rich.table import Table

    t = Table(title=f"dw clean {name} --keep {keep}" + (" (dry run: nothing deleted)" if dry_run else ""))
    for col in ("run id", "state", "kept (step)", "deleted (step)", "freed", "note"):
        t.add_column(col, justify="right" if col == "freed" else "left", no_wrap=col != "note")
    for r in res["runs"]:
        n = len(r["leftovers"])
        gone = [*map(str, r["deleted"]), *([f"{n} leftover{'s' * (n != 1)}"] if n else [])]
        t.add_row(
            r["run_id"],
            r["state"],
            ", ".join(map(str, r["kept"])) or "—",
            ", ".join(gone) or "—",
            size_text(r["bytes"]) if r["state"] == "done" else "—",
            r["note"] or "",
        )
    wide_console().print(t)
    console().print(summary_line(res), highlight=False, soft_wrap=True)
