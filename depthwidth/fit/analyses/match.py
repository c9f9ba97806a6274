"""FLOPs to match uniform (``--match``): per width shape, loss against training compute fitted as
L(C) = E + A·(C/C_ref)^-alpha, and the fraction of the uniform model's FLOPs (mean width, KV cache)
each shape needs to reach its loss at each uniform size (the statistics: fit/match.py).

A document of its own (``DOCUMENT``: match.json, beside fit.json), which ``dw fit --match`` makes
instead of a law fit (pipeline.py ``run_fit``): the law may be fitted on a filtered table (``--where
shape=uniform``), the match needs every shape.  Its section is the document's body, computed on the
runs ``--where`` kept; its verdict lines and tables are read from the document: ``dw fit --match``
prints them, ``dw report`` shows them from match.json or from a match it computes from its own runs
(report/matching.py: where the report's document comes from).  Its figure, ``flops_match.png``
(``figures``, drawn by report/figs.py): each run's final loss against its FLOPs per shape, with the
fitted curves and the inversions its table reports.
"""

from __future__ import annotations

SECTION = "match"
OPTIONS = ("match", "where", "bootstrap", "level", "seed", "delta")
DOCUMENT = "match.json"  # written beside fit.json, instead of a law fit
SCHEMA = "dw.match/1"
FLAG = "--match"  # how dw fit asks for it, and the library's call
CALL = "run_fit(match=True)"
WIDTH = 200  # the terminal width its tables need: 15 columns, do not wrap the intervals
ORIGIN = "dw fit --match"  # where a document this module's tables are made from came from, by default

CI = "[{0[0]:.3f}, {0[1]:.3f}]"  # a [lo, hi] row value shown in one cell


def section(ctx) -> dict:
    """The match of the runs this fit is about (``ctx.table``: ``--where`` applied)."""
    from depthwidth.fit.match import flops_to_match

    o = ctx.opts
    return flops_to_match(ctx.table, bootstrap=o.bootstrap, level=o.level, seed=o.seed, delta=o.delta).to_dict()


def verdicts(doc: dict) -> dict:
    """What its table says beyond the numbers: ×unif < 1, the shape needs less than the uniform model
    (each fraction's run-bootstrap interval says whether it does; docs/verdicts.md)."""
    return {
        "lines": [
            "×unif < 1: the shape needs less than the uniform model; mean width and KV interpolated log-log "
            "along the shape's sizes at the matched FLOPs"
        ]
    }


def _ci(c):
    """[lo, hi] for a row; an open upper end (replicates that never reach the loss) is inf."""
    import math

    if not isinstance(c, (list, tuple)) or len(c) != 2 or c[0] is None:
        return None
    return [c[0], math.inf if c[1] is None else c[1]]


def tables(doc: dict | None, origin: str = ORIGIN) -> dict:
    """{"flops_curves": Table, "flops_match": Table}: the fitted curves and the matched fractions of a
    match document (``doc``; None: there is none, ``origin`` says why)."""
    from depthwidth.core.tables import Col, Table
    from depthwidth.fit.match import NEEDS, PAPER_MATCH

    ccols = [
        Col("shape", "shape"),
        Col("sizes", "sizes"),
        Col("runs", "runs"),
        Col("E", "E", "{:.4g}"),
        Col("E_ci", "E CI", CI.replace(".3f", ".4g")),
        Col("A", "A", "{:.4g}"),
        Col("alpha", "alpha", "{:.4g}"),
        Col("alpha_ci", "alpha CI", CI.replace(".3f", ".4g")),
        Col("r2", "R²", "{:.4f}"),
        Col("flops_min", "C min", "{:.3g}"),
        Col("flops_max", "C max", "{:.3g}"),
    ]
    mcols = [
        Col("shape", "shape"),
        Col("width", "h"),
        Col("depth", "L"),
        Col("flops_uniform", "C uniform", "{:.3g}"),
        Col("loss_uniform_fit", "loss to reach", "{:.4f}"),
        Col("flops_fraction", "FLOPs ×unif", "{:.3f}"),
        Col("flops_fraction_ci", "CI", CI),
        Col("mean_width_ratio", "mean width ×unif", "{:.3f}"),
        Col("mean_width_ratio_ci", "CI", CI),
        Col("kv_ratio", "KV ×unif", "{:.3f}"),
        Col("kv_ratio_ci", "CI", CI),
        Col("extrapolated", "extrap."),
        Col("paper_flops", "paper FLOPs", "{:.3f}"),
        Col("paper_mean_width", "paper width", "{:.3f}"),
        Col("paper_kv", "paper KV", "{:.2f}"),
    ]
    ct = Table("flops_curves", "Loss vs training FLOPs per shape: L(C) = E + A·(C/C_ref)^-alpha", ccols)
    mt = Table(
        "flops_match",
        "FLOPs to match uniform: compute, mean width and KV cache each shape needs to reach the uniform model's loss",
        mcols,
    )
    p = PAPER_MATCH
    mt.notes.append(
        f"paper (Wu et al.): the × model reaches the {p['baseline']} loss {p['loss']} with "
        f"{100 * p['flops_fraction']:.1f}% of its FLOPs and {100 * p['mean_width_ratio']:.1f}% of its "
        "mean width (−15% KV cache); shown beside the × row at the largest uniform size"
    )
    if doc is None:
        note = origin if NEEDS in origin else f"no FLOPs-to-match: {origin}"
        ct.notes.append(note)
        mt.notes.append(note)
        return {"flops_curves": ct, "flops_match": mt}
    lvl = (doc.get("bootstrap") or {}).get("level", 0.95)
    for c in doc["curves"]:
        ct.rows.append(
            {
                "shape": c["shape"],
                "sizes": c["sizes"],
                "runs": c["runs"],
                "formula": c["formula"],
                "E": c["params"]["E"],
                "E_ci": _ci(c["ci"].get("E")),
                "A": c["params"]["A"],
                "alpha": c["params"]["alpha"],
                "alpha_ci": _ci(c["ci"].get("alpha")),
                "r2": c["r2"],
                "flops_min": c["flops_range"][0],
                "flops_max": c["flops_range"][1],
                "c_ref": doc["c_ref"],
            }
        )
    ct.notes.append(
        f"C_ref = {doc['c_ref']:.0e} FLOPs; one point per run (its final budget); "
        f"CI: {100 * lvl:.0f}% run-bootstrap intervals; two sizes fit E = 0"
    )
    top = max((r["flops_uniform"] for r in doc["rows"]), default=None)
    for r in doc["rows"]:
        paper = r["shape"] == p["shape"] and r["flops_uniform"] == top
        mt.rows.append(
            {
                "shape": r["shape"],
                "width": r["width"],
                "depth": r["depth"],
                "flops_uniform": r["flops_uniform"],
                "loss_uniform": r["loss_uniform"],
                "loss_uniform_fit": r["loss_uniform_fit"],
                "flops_match": r["flops_match"],
                "flops_fraction": r["flops_fraction"],
                "flops_fraction_ci": _ci(r["flops_fraction_ci"]),
                "mean_width_ratio": r["mean_width_ratio"],
                "mean_width_ratio_ci": _ci(r["mean_width_ratio_ci"]),
                "kv_ratio": r["kv_ratio"],
                "kv_ratio_ci": _ci(r["kv_ratio_ci"]),
                "extrapolated": r["extrapolated"],
                "unreachable": r["unreachable"],
                "paper_flops": p["flops_fraction"] if paper else None,
                "paper_mean_width": p["mean_width_ratio"] if paper else None,
                "paper_kv": p["kv_ratio"] if paper else None,
            }
        )
    mt.notes += [f"{origin}; {line}" for line in verdicts(doc)["lines"]]
    mt.notes += list(doc.get("warnings", []))
    return {"flops_curves": ct, "flops_match": mt}


def figures(fit, tables=None, points=None, **_) -> dict:
    """{"flops_match_curves": the FLOPs-to-match figure (core/figures.py ``Figure``) or why it is not
    drawn}: each run's final loss against its training FLOPs per shape, the shape's fitted curve
    L(C) = E + A·(C/C_ref)^-alpha over half its smallest to twice its largest FLOPs, and dotted, from
    each uniform size to the FLOPs at which the shape reaches its loss.  A match is no section of
    fit.json (``fit`` is not read): ``tables``, this module's ``tables`` as the report made them (from
    match.json or a match it computed; report/matching.py); ``points``, a callable giving one row per
    finished run at its final budget (shape, flops, loss: report/matching.py ``run_frame``)."""
    import numpy as np

    from depthwidth.core.figures import Figure, Panel, Series

    curves = (tables or {}).get("flops_curves")
    if curves is None or not curves.rows:
        why = curves.notes[0] if curves is not None and curves.notes else "absent"
        return {"flops_match_curves": f"no FLOPs-to-match fit ({why})"}
    matched = (tables or {}).get("flops_match")
    pts = points() if points is not None else None
    panel = Panel(
        xlabel="training compute C (FLOPs)",
        ylabel="held-out loss (nats/token)",
        title="Loss vs training compute per shape, fitted L(C) = E + A·C^-α",
        xscale="log",
    )
    for i, c in enumerate(curves.rows):
        col, shape = f"C{i}", c["shape"]
        if pts is not None:
            g = pts[pts["shape"] == shape]
            label = f"{'×' if shape == 'x' else shape}: α = {c['alpha']:.3g}, E = {c['E']:.3g}"
            style = {"color": col, "s": 22, "marker": "o" if shape == "uniform" else "D", "zorder": 3, "label": label}
            panel.series.append(Series("scatter", g["flops"].to_numpy(), g["loss"].to_numpy(), style=style))
        C = np.geomspace(c["flops_min"] / 2, c["flops_max"] * 2, 100)
        L = c["E"] + c["A"] * (C / c["c_ref"]) ** -c["alpha"]
        panel.series.append(Series("plot", C, L, "-", {"color": col, "lw": 1.2}))
        for r in matched.rows if matched is not None else []:  # the inversion: uniform size -> the shape's FLOPs
            if r["shape"] == shape and r["flops_match"] is not None:
                x, y = [r["flops_uniform"], r["flops_match"]], [r["loss_uniform_fit"]] * 2
                panel.series.append(Series("plot", x, y, ":", {"color": col, "lw": 1}))
    caption = (
        "one point per run at its final budget; lines: the fitted curves; dotted: from each uniform "
        "size to the FLOPs at which the shape reaches the same loss"
    )
    return {"flops_match_curves": Figure("flops_match.png", panel.title, caption, (6.4, 4.2), [panel])}
