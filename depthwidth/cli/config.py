"""``dw config show``: every setting with its default, type, allowed values and doc (from the schema)."""

from __future__ import annotations

from typing import List, Optional

import typer

from depthwidth.report.render import emit_json, wide_console
from depthwidth.core.errors import bad


def show_cmd(
    args: Optional[List[str]] = typer.Argument(
        None,
        help="a group (train, probe, run, optim, model, data, launcher, "
        "tracker), one setting (model.quantum), or fit: dw fit's defaults; none: every group; "
        "with GROUP=PRESET or KEY=VALUE overrides: the run config they resolve to",
        metavar="[NAME] [OVERRIDES]...",
    ),
    as_json: bool = typer.Option(False, "--json", help="one JSON list of settings (with overrides: the config)"),
    markdown: bool = typer.Option(
        False, "--markdown", help="the settings reference's table, docs/reference/settings.md (every group)"
    ),
) -> None:
    """Every setting of GROUP (or one GROUP.KEY) with its default, type, allowed values and doc; with
    overrides, the run config they resolve to, checked as dw train checks it, without training.

    Examples:

      dw config show model

      dw config show launcher.time

      dw config show model=vwt_1b optim=vwt          (a preset, resolved: every group)

      dw config show model model=vwt_1b model.depth=12   (one group of it)

    A preset (conf/GROUP/NAME.yaml) holds only what differs from its base; without overrides these
    are the bases.
    """
    from depthwidth.config import docs

    overrides = [a for a in args or [] if "=" in a or a.startswith("~")]  # ~KEY: a deletion
    names = [a for a in args or [] if a not in overrides]
    if len(names) > 1:
        raise bad("name", " ".join(names), "one group or setting, then GROUP=PRESET or KEY=VALUE overrides")
    name = names[0] if names else None
    if overrides:
        _resolved(name, overrides, as_json)
        return
    if markdown:
        print(docs.markdown())
        return
    from depthwidth.fit.defaults import rows as fit_rows  # dw fit's defaults, not run settings

    found = docs.find(name, {"fit": fit_rows()})
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


def _resolved(name: str | None, overrides: list[str], as_json: bool) -> None:
    """The run config ``overrides`` compose to (what ``dw train`` would train), checked by the schema
    as dw train checks it; ``name``: one group or setting of it."""
    from depthwidth.config.check import check
    from depthwidth.config.compose import compose
    from depthwidth.config.node import plain
    from depthwidth.model.resolve import from_config

    cfg = compose(overrides)
    check(cfg)
    from_config(cfg["model"])  # the model's own checks (widths, heads, shapes), as dw train makes it
    doc = plain(cfg)
    if name:
        node = doc
        for part in name.split("."):
            if not isinstance(node, dict) or part not in node:
                raise bad("name", name, "a group or setting of the config: " + ", ".join(doc))
            node = node[part]
        doc = {name: node}
    if as_json:
        emit_json(doc)
        return
    import yaml

    print(f"# dw config show {' '.join(overrides)}: resolved, checked (dw train {' '.join(overrides)} trains this)")
    print(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None).rstrip())
