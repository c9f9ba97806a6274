"""``dw analyze``: what is inside trained models — matrix entropy, MLP density, logit lens."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from depthwidth.report.render import console, emit_json, runs_progress, wide_console
from depthwidth.measure.inside import DEFAULT_TOKENS


def analyze_cmd(
    target: str = typer.Argument(..., help="a run directory, or a sweep name under the run store"),
    ckpt: str = typer.Option("final", "--checkpoint", help="final (the newest valid checkpoint) or a step"),
    tokens: int = typer.Option(
        DEFAULT_TOKENS,
        "--tokens",
        help="evaluation tokens (whole windows of the run's seq_len, from the validation split; a smaller split "
        "gives the distinct tokens it holds, and says so)",
    ),
    centre: bool = typer.Option(False, "--centre", help="centre each layer's stream before its matrix entropy"),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda: where the model is rebuilt and measured (fp32)"),
    as_json: bool = typer.Option(False, "--json", help="print the analysis document(s) instead of tables"),
    root: Optional[str] = typer.Option(
        None, "--root", help="run store root for a sweep name (default $DW_RUNS or ./runs)"
    ),
) -> None:
    """Per-layer matrix entropy, MLP activation density and logit lens of a run's checkpoint.

    Example: dw analyze runs/demo/3f2a1c0b9d8e

    Example: dw analyze demo            (every finished run of the sweep without an analysis yet)

    Writes analysis.json next to the run's ckpt/ (analysis_step_N.json for --checkpoint N).
    Exit codes: 0 ok; 2 bad input (no such run or sweep, no checkpoint).
    """
    from depthwidth.core.errors import bad
    from depthwidth.train import analysis

    if tokens < 1:
        raise bad("--tokens", tokens, "an integer >= 1")
    if ckpt != "final" and not ckpt.isdigit():
        raise bad("--checkpoint", ckpt, "final or a checkpoint step")
    path = Path(target)
    if path.is_dir() or "/" in target:  # a path: one run directory
        docs = [analysis.analyse_run(path, ckpt, tokens, centre=centre, device=device)]
        sweep = False
    else:
        docs, sweep = _sweep(analysis, target, root, ckpt, tokens, centre, device, quiet=as_json), True
    if as_json:
        emit_json(docs if sweep else docs[0])
        return
    out = wide_console()
    for d in docs:
        _render(d, out, tokens)
    if sweep:
        done = f"{len(docs)} run(s) analysed" if docs else "nothing to do: no finished run without an analysis"
        console(stderr=True).print(f"analyze: {done} in sweep {target}")


def _sweep(analysis, name, root, ckpt, tokens, centre, device, quiet):
    todo = analysis.pending(name, root, ckpt)
    with runs_progress("analyze", len(todo), quiet) as progress:
        return analysis.analyse_sweep(name, root, ckpt, tokens, centre=centre, device=device, progress=progress)


def _f(v, fmt):
    return "—" if v is None else format(v, fmt)


def _evaluated(e: dict, asked: int) -> str:
    """What the eval set was: its distinct tokens, and why there are fewer than asked."""
    n = f"{e['tokens']:,} {e['source']} val tokens"
    if e["tokens"] < asked:  # the split holds fewer disjoint windows (measure.inside.eval_windows)
        n += (
            f" (the most the val split holds in disjoint windows of {e['seq_len']}, "
            f"{e['sequences']:,} of them: fewer than the {asked:,} asked)"
        )
    return n


def _render(d: dict, out, asked: int = DEFAULT_TOKENS) -> None:
    from rich.table import Table

    e, o = d["eval"], d["options"]
    t = Table(
        title=(
            f"run {d['run_id']} · {d['shape']} {d['depth']}L × {d['width']} · step {d['step']} · "
            f"{_evaluated(e, asked)} · eval loss {d['eval_loss']:.4f}"
        ),
        caption=(
            f"H: normalised matrix entropy ({'centred' if o['centre'] else 'not centred'}, "
            f"{e['entropy_tokens']:,} tokens) over the layer's own w_i coordinates and over the "
            f"whole stream; MLP: mean density, dead (< {o['dead_below']:.1%} of tokens), balance "
            f"{_rule(o)}; lens: CE and entropy in nats, p(target) = exp(−CE) (geometric mean), "
            "KL(final‖l), KL(l‖l−1)"
        ),
    )
    heads = (
        "layer",
        "w_i",
        "H prefix",
        "H stream",
        "MLP dens",
        "dead",
        "balance",
        "MLP ε",
        "lens CE",
        "p(target)",
        "lens H",
        "KL final",
        "KL prev",
    )
    for h in heads:
        t.add_column(h, justify="right")
    for r in d["layers"]:
        t.add_row(
            str(r["layer"]),
            str(r["width"]),
            _f(r["entropy_prefix"], ".3f"),
            _f(r["entropy_full"], ".3f"),
            _f(r["mlp_density"], ".3f"),
            _f(r["mlp_dead"], ".3f"),
            _f(r["mlp_balance"], ".3f"),
            _f(r.get("mlp_threshold"), ".3g"),
            _f(r["lens_ce"], ".4f"),
            _f(r["lens_target_prob"], ".4f"),
            _f(r["lens_entropy"], ".3f"),
            _f(r["lens_kl_final"], ".4f"),
            _f(r["lens_kl_prev"], ".4f"),
        )
    out.print(t)


def _rule(o: dict) -> str:
    """When an MLP unit counts as active, as the document's options say."""
    if o.get("mlp_rule") == "cett":
        return (
            f"(SwiGLU active: |a| ≥ ε, the layer's CETT threshold: dropping the units below it loses "
            f"≤ {o['cett_target']:.0%} of the MLP output's norm, mean over {o['calibration_tokens']:,} tokens)"
        )
    if o.get("mlp_rule") == "fixed":
        return f"(SwiGLU active: |a| ≥ ε = {o['swiglu_threshold']:g}, fixed)"
    return "(GELU active: a > 0)"
