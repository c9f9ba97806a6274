"""``dw forget``: leave runs out of a sweep's status, tables, fits and reports; the record keeps them."""

from __future__ import annotations

from typing import List, Optional

import typer

from depthwidth.report.render import console, emit_json


def forget_cmd(
    name: str = typer.Argument(..., help="sweep name (runs/NAME/manifest)"),
    run_ids: Optional[List[str]] = typer.Argument(None, help="run ids to forget (dw status NAME lists them)"),
    state: Optional[List[str]] = typer.Option(
        None, "--state", help="also every run in this state, e.g. lost (repeatable)"
    ),
    reason: Optional[str] = typer.Option(None, "--reason", help="a note kept in the manifest"),
    as_json: bool = typer.Option(False, "--json", help="one JSON document"),
) -> None:
    """Forget runs of a sweep: status, run tables, fits and reports leave them out; nothing is deleted.

    Example: dw forget mydocs 3f2a9c1b0d4e 77b0e1c2a9f3 --reason "one-off train.steps=1000"

    Example: dw forget mydocs --state lost

    The manifest keeps a forget event per run (its directory and files stay); dw sweep NAME submits a
    forgotten run again if the sweep file still plans it.  Runs still pending or running are refused.
    """
    from depthwidth.sweep.forget import forget

    res = forget(name, run_ids or [], state or [], reason)
    if as_json:
        emit_json(res)
        return
    n = len(res["forgotten"])
    console().print(
        f"forgot {n} run{'s' * (n != 1)} of {name}"
        + (
            f" ({', '.join(r['run_id'] + ' ' + r['state'] for r in res['forgotten'][:8])}"
            + (" …" if n > 8 else "")
            + ")"
            if n
            else ""
        )
        + f"; {res['remaining']} remain (dw status {name})",
        highlight=False,
    )
