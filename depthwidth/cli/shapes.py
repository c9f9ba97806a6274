"""``dw shapes``: per-layer widths of a width-shape family, against its uniform baseline."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from depthwidth.cli.render import console, emit_json


def shapes_cmd(
    family: str = typer.Argument(..., help="uniform | increasing | decreasing | diamond | x (also ×, <, >, ◇)"),
    width: Optional[int] = typer.Option(
        None, "--width", "-w", help="h: width of the uniform baseline (and embedding); default: the preset's"
    ),
    depth: Optional[int] = typer.Option(None, "--depth", "-d", help="L: number of layers; default: the preset's"),
    ratio: float = typer.Option(0.3, "--ratio", "-r", help="ρ = narrowest width / h, in (0, 1]"),
    turn: Optional[int] = typer.Option(
        None, "--turn", "-k", help="turning layer k in [1, L] (default 0.75·L for x, 0.5·L for diamond)"
    ),
    match: Optional[str] = typer.Option(
        None,
        "--match",
        help="exact (true parameter count) | vwt (the paper's convention: no embeddings, norms or rounding); "
        "default: the preset's (exact for vwt, depth_delusion; vwt for the paper presets)",
    ),
    vocab: int = typer.Option(100263, "--vocab", help="vocabulary size V (cl100k = 100263, GPT-2 = 50257)"),
    preset: str = typer.Option(
        "vwt",
        "--preset",
        help="model preset from conf/model (vwt | depth_delusion | vwt_200m | vwt_500m | vwt_1b | vwt_2b | moe_1b3b)",
    ),
    symmetric: Optional[bool] = typer.Option(
        None, "--symmetric/--asymmetric", help="force w_1 = w_L (default on for x, diamond)"
    ),
    quantum: Optional[int] = typer.Option(
        None, "--quantum", "-q", help="round widths to a multiple of q (default: the preset's)"
    ),
    heads: Optional[int] = typer.Option(
        None, "--heads", "-H", help="fixed head count per layer (must divide every width); default: the preset's"
    ),
    head_dim: Optional[int] = typer.Option(
        None, "--head-dim", help="fixed head size instead (widths then multiples of it)"
    ),
    seq_len: int = typer.Option(4096, "--seq-len", help="context length for attention FLOPs"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object instead of a table"),
) -> None:
    """Per-layer widths of FAMILY matched in parameters to a uniform DEPTH × WIDTH model.

    Matched exactly (the true parameter count) unless the preset or --match says vwt; a
    shape more than 1% off the uniform model's count gets a warning naming the ratio.

    Example: dw shapes x -w 96 -d 6 -q 8 -H 4 --vocab 256   (the demo sweep's × shape)
             dw shapes x --width 640 --depth 16 --vocab 100263 --match vwt   (the paper's widths)
             dw shapes x --preset moe_1b3b        (total and active parameters of the MoE model)
    """
    from depthwidth.model.figures import shape_report

    rep = shape_report(
        family,
        width=width,
        depth=depth,
        ratio=ratio,
        turn=turn,
        match=match,
        vocab=vocab,
        preset=preset,
        symmetric=symmetric,
        quantum=quantum,
        seq_len=seq_len,
        heads=heads,
        head_dim=head_dim,
    )
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
