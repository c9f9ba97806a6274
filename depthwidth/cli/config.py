"""``dw config show``: every setting with its default, type, allowed values and doc (from the schema)."""

from __future__ import annotations

from typing import Optional

import typer

from depthwidth.cli.render import emit_json, wide_console
from depthwidth.core.errors import bad


def show_cmd(
    name: Optional[str] = typer.Argument(
        None,
        help="a group (train, probe, run, optim, model, data, launcher, "
        "tracker), one setting (model.quantum), or fit: dw fit's defaults; none: every group",
    ),
    as_json: bool = typer.Option(False, "--json", help="one JSON list of settings"),
    markdown: bool = typer.Option(False, "--markdown", help="the README's settings table (every group)"),
) -> None:
    """Every setting of GROUP (or one GROUP.KEY) with its default, type, allowed values and doc.

    Examples:

      dw config show model

      dw config show launcher.time

    A preset (conf/GROUP/NAME.yaml) holds only what differs from its base; these are the bases.
    """
    from depthwidth.config import docs
    from depthwidth.config.schema import ALL_GROUPS

    if markdown:
        print(docs.markdown())
        return
    if name and name.split(".", 1)[0] == "fit":  # dw fit's defaults (fit/defaults.py), not a run setting
        from depthwidth.fit.defaults import rows as fit_rows

        found = [r for r in fit_rows() if name in ("fit", r["key"])]
        if not found:
            raise bad("setting", name, "fit or fit.KEY: " + ", ".join(r["key"] for r in fit_rows()))
    else:
        found = docs.select(name) if name else [r for g in ALL_GROUPS for r in docs.rows(g)]
    if as_json:
        emit_json(found)
        return
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"settings of {name}" if name else "every setting", title_justify="left")
    for col in ("setting", "default", "type", "allowed", "what it does"):
        t.add_column(col, overflow="fold")
    for r in found:
        key = escape(r["key"]) + ("" if r["variant"] is None else f" [dim]({r['variant']})[/]")
        t.add_row(key, *(escape(x) for x in (docs.show_value(r["default"]), r["type"], r["allowed"], r["doc"])))
    wide_console().print(t)
