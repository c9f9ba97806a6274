"""``dw shapes``: per-layer widths of a width-shape family, against its uniform baseline."""

from __future__ import annotations

import sys
import typer

from depthwidth.cli.options import taken, with_options
from depthwidth.report.render import console, emit_json
from depthwidth.model.options import SHAPES_OPTIONS  # dw shapes' options (model/options.py)


@with_options(SHAPES_OPTIONS)
def shapes_cmd(
    family: str = typer.Argument(..., help="uniform | increasing | decreasing | diamond | x (also ×, <, >, ◇)"),
    **kw,
) -> None:
    """Per-layer widths of FAMILY matched in parameters to a uniform DEPTH × WIDTH model.

    Matched exactly (the true parameter count) unless the preset or --match says vwt; a
    shape more than 1% off the uniform model's count gets a warning naming the ratio.

    Example: dw shapes x -w 96 -d 6 -q 8 -H 4 --vocab 256   (the demo sweep's × shape)
             dw shapes x --width 640 --depth 16 --vocab 100263 --match vwt   (the paper's widths)
             dw shapes x --preset moe_1b3b        (total and active parameters of the MoE model)
    """
    from depthwidth.model.figures import shape_report

    o = taken((SHAPES_OPTIONS,), kw)
    as_json = o.pop("as_json")
    rep = shape_report(family, **o)
    if rep.get("warning"):
        sys.stderr.write(f"dw: warning: {rep['warning']}\n")  # one line, never wrapped
    if as_json:
        emit_json(rep)
        return
    _render(rep)


def _render(rep: dict) -> None:
    from rich.table import Table

    c = console()
    widths = rep["widths"]
    t = Table(
        title=f"{rep['family']} · h={rep['width']} · L={rep['depth']} · ρ={rep['ratio']} · k={rep['turn']} · "
        f"match={rep['match']}"
    )
    t.add_column("layer", justify="right")
    t.add_column("width", justify="right")
    t.add_column("w / h", justify="right")
    for i, w in enumerate(widths, 1):
        t.add_row(str(i), str(w), f"{w / rep['width']:.2f}")
    c.print(t)
    s, u = rep["shaped"], rep["uniform"]
    heads = f"{rep['heads']} heads" if rep.get("heads") else f"head size {rep['head_dim']}"
    cmp = Table(
        title=f"against the uniform baseline (V={rep['vocab']}, preset {rep['preset']}, {heads}, "
        f"q={rep['quantum']}, seq {rep['seq_len']})"
    )
    for col in ("", "uniform", rep["family"], "ratio"):
        cmp.add_column(col, justify="right")
    rows = [
        ("total params", "params", "{:,.0f}"),
        ("non-embedding params", "params_non_embedding", "{:,.0f}"),
        *([("active params (MoE, per token)", "params_active", "{:,.0f}")] if rep.get("moe") else []),
        *([("active params, vwt convention", "params_vwt_active", "{:,.0f}")] if rep.get("moe") else []),
        ("params, vwt convention", "params_vwt", "{:,.0f}"),
        ("FLOPs / token (train)", "flops_per_token", "{:.4g}"),
        ("KV bytes / token (bf16)", "kv_bytes_per_token", "{:,.0f}"),
        ("mean width", "mean_width", "{:.1f}"),
    ]
    for label, key, fmt in rows:
        cmp.add_row(label, fmt.format(u[key]), fmt.format(s[key]), f"{s[key] / u[key]:.4f}")
    c.print(cmp)
