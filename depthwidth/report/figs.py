"""The figures of ``dw report --plots DIR`` (matplotlib, Agg backend, PNG).

Imported only when ``--plots`` is given.  Every figure is sized for a paper:
6.4 inches wide (a full text width, so 10-pt type stays 10 pt) at 150 dpi,
axes labelled with units.  ``make_all`` returns one record per figure written:
``{file, path, title, caption, width_px, height_px}``; a figure whose data are
absent is skipped and named in the report's notes with the reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from depthwidth.core.figures import Figure
from depthwidth.fit import analyses
from depthwidth.fit.derived import COLUMN, n_column
from depthwidth.fit.userlaw import law_of_label
from depthwidth.report import inside_figs
from depthwidth.report.matching import run_frame
from depthwidth.fit.result import FitDocument
from depthwidth.report.document import SHAPE_LABEL, SHAPES

DPI = 150
WIDTH_IN = 6.4
SHAPE_ORDER = SHAPES
LOSS_LABEL = "held-out loss (nats/token)"


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 10,
            "axes.labelsize": 10,
            "axes.titlesize": 10.5,
            "legend.fontsize": 8,
            "xtick.labelsize": 9,
            "ytick.labelsize": 9,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "figure.dpi": DPI,
            "savefig.dpi": DPI,
        }
    )
    return plt


def _save(plt, fig, out: Path, file: str, title: str, caption: str) -> dict:
    w, h = fig.get_size_inches()
    fig.tight_layout()
    path = out / file
    tmp = out / f".{file}.tmp.png"
    fig.savefig(tmp, dpi=DPI)  # fixed size: no bbox_inches="tight", so the stated size holds
    plt.close(fig)
    tmp.replace(path)
    return {
        "file": file,
        "path": str(path),
        "title": title,
        "caption": caption,
        "width_px": int(round(w * DPI)),
        "height_px": int(round(h * DPI)),
    }


def make_all(data, rep, out: Path) -> list[dict]:
    plt = _plt()
    out = Path(out)
    figs, skipped = [], []
    for fn in (
        loss_vs_depth,
        grad_profiles,  # gradient persistence's (fit/analyses/gradient_persistence.py figures)
        tau_vs_width,
        shape_profiles,
        loss_vs_flops,
        flops_match_curves,  # FLOPs to match uniform's (fit/analyses/match.py figures)
        fit_residuals,
        *inside_figs.FIGURES,
        isoflop_profiles,  # the isoFLOP analysis's (fit/analyses/isoflop.py figures)
        accuracy_vs_loss,  # the downstream analysis's (fit/analyses/downstream.py figures)
    ):
        try:
            r = fn(plt, data, rep, out)
            if isinstance(r, tuple):  # inside_figs: (fig, file, title, caption)
                r = _save(plt, r[0], out, *r[1:])
        except Exception as e:  # one bad figure must not lose the others
            plt.close("all")
            r = f"failed ({type(e).__name__}: {' '.join(str(e).split())[:160]})"
        if isinstance(r, dict):
            figs.append(r)
        else:
            skipped.append(f"{fn.__name__}: {r}")
    for s in skipped:
        rep["notes"].append(f"figure not drawn — {s}")
    return figs


def _colors(n):
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    return [cmap(x) for x in (np.linspace(0.05, 0.85, n) if n > 1 else [0.4])]


def _plain_ticks(ax):
    """Log axes labelled 32, 64, 2.5 rather than 3.2×10^1."""
    from matplotlib.ticker import FuncFormatter

    f = FuncFormatter(lambda v, _: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(f)
        axis.set_minor_formatter(f)


# ---------------------------------------------------------------------------- an analysis's figures


def _analysis(plt, out: Path, fit, section: str, name: str, **inputs):
    """Figure ``name`` of analysis ``section`` (fit/analyses/ ``figures``: data), drawn and saved; or why
    it is not drawn."""
    spec = analyses.figures(fit, section, **inputs).get(name, f"{section} draws no {name}")
    if not isinstance(spec, Figure):
        return spec
    return _save(plt, draw(plt, spec), out, spec.file, spec.title, spec.caption)


def _color(c):
    """A colour of a ``Series``' style: a colour map's (``{"cmap": name, "at": x}``) or matplotlib's own."""
    if isinstance(c, dict):
        import matplotlib

        return matplotlib.colormaps[c["cmap"]](c["at"])
    return c


def draw(plt, spec: Figure):
    """The matplotlib figure of ``spec`` (core/figures.py: an analysis's figure as data), its panels side
    by side or on its grid; the caller saves it."""
    rows, cols = spec.grid or (1, len(spec.panels))
    fig, axes = plt.subplots(rows, cols, figsize=spec.size, squeeze=False, sharey=spec.sharey)
    for ax, p in zip(axes.flat, spec.panels):
        for s in p.series:
            style = {k: _color(v) if k == "color" else v for k, v in s.style.items()}
            if s.kind == "errorbar":  # its third positional argument is yerr
                ax.errorbar(s.x, s.y, fmt=s.fmt, **style)
            else:
                getattr(ax, s.kind)(s.x, s.y, *([s.fmt] if s.fmt else []), **style)
        if p.xscale != "linear":
            ax.set_xscale(p.xscale)
        if p.yscale != "linear":
            ax.set_yscale(p.yscale)
        if p.plain_ticks:
            _plain_ticks(ax)
        ax.set_xlabel(p.xlabel)
        ax.set_ylabel(p.ylabel)
        ax.set_title(p.title)
        if p.legend is not None and (p.series or not p.legend_if_drawn):
            ax.legend(loc=p.legend, **({} if p.legend_fontsize is None else {"fontsize": p.legend_fontsize}))
    for ax in list(axes.flat)[len(spec.panels) :]:
        ax.set_visible(False)
    if spec.suptitle:
        fig.suptitle(spec.suptitle, fontsize=10.5)
    return fig


# ---------------------------------------------------------------------------- fitted law


def _law(rec: dict):
    """The law of a figure record ({law, options, params}: fit.json's ``verdicts.figure``, ``_record``), to evaluate."""
    return law_of_label(rec["law"], rec.get("options"))  # a user-defined law too


def _record(fit: FitDocument) -> dict:
    """The fitted law of ``fit`` as a figure record: {law, options, params}."""
    return {"law": fit.law, "options": fit.options, "params": fit.params}


def _convention(fit: FitDocument | None) -> str:
    """The N the fit read (fit.json before --n-convention: the total)."""
    return (fit.n_convention.get("name") if fit is not None else None) or "total"


def _predict(rec: dict, rows: dict, convention: str) -> np.ndarray:
    """The law of figure record ``rec``: its loss at ``rows`` (columns as the run table has them:
    ``params`` the total), its N taken in the convention the fit was made in (``convention``: the
    main fit's, for a compared law too)."""
    law = _law(rec)
    n = len(next(iter(rows.values())))
    table = {c: np.asarray(rows[c], dtype=float) for c in law.columns if c in rows}
    if "params" in law.columns:
        table["params"] = n_column(rows, convention)
    table["loss"] = np.zeros(n)
    return law.predict(rec["params"], table)


# ---------------------------------------------------------------------------- figures


def loss_vs_depth(plt, data, rep, out):
    """Measured loss vs depth with the fitted law; when its claim is not identified and ``--compare``
    prefers another law on held-out error, that law solid and the fitted one dashed (fit.json's
    ``verdicts.figure``, decided by dw fit: fit/verdicts.py ``drawn``)."""
    grid = [r for r in rep["tables"]["loss_grid"].rows if r["loss"] is not None]
    if not grid:
        return "no finished uniform runs"
    draw = data.fit.verdicts.figure if data.fit else None  # what the fit's verdict allows to be drawn
    main = draw["fit"] if draw else None
    alt = (draw or {}).get("alternative")
    conv = _convention(data.fit)  # a compared law was fitted on the same N (fit/analyses/compare.py)
    nkey = COLUMN.get(conv, "params")  # the grid's count the curve runs along (12DW2: from depth, width)
    widths = sorted({r["width"] for r in grid})
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.2))
    curves, missing = False, {}  # missing: width -> why its fitted curve is not drawn
    style = "--" if draw and draw["style"] == "dashed" else "-"
    for w, col in zip(widths, _colors(len(widths))):
        rs = sorted((r for r in grid if r["width"] == w), key=lambda r: r["depth"])
        d = np.array([r["depth"] for r in rs], float)
        y = np.array([r["loss"] for r in rs], float)
        sd = np.array([r["sd"] or 0.0 for r in rs], float)
        ax.errorbar(d, y, yerr=sd if sd.any() else None, fmt="o", color=col, capsize=3, label=f"W = {w}")
        if main and len(rs) < 2:
            missing[w] = "one depth only"
        elif main and not all(r.get(nkey) for r in rs):
            missing[w] = "runs without a parameter count"
        elif main:
            try:
                slope, icpt = np.polyfit(d, [r[nkey] for r in rs], 1)  # params are linear in depth at fixed W
                dd = np.linspace(d.min(), d.max(), 200)
                toks = max(r["tokens"] or 0 for r in rs) or 1.0
                cols = {
                    nkey: icpt + slope * dd,
                    "tokens": np.full_like(dd, toks),
                    "depth": dd,
                    "width": np.full_like(dd, w),
                }
                pred = _predict(main, cols, conv)
                if not np.isfinite(pred).any():
                    raise ValueError("the law predicts no finite loss at these depths")
                ax.plot(dd, pred, style, color=col, lw=1.3, alpha=0.85)
                if alt:
                    ax.plot(dd, _predict(alt["fit"], cols, conv), "--", color=col, lw=1.1, alpha=0.7)
                curves = True
            except Exception as e:  # one width's curve must not lose the figure, nor hide why
                missing[w] = f"{type(e).__name__}: {' '.join(str(e).split())[:100]}"
    if max(widths) and max(r["depth"] for r in grid) / max(1, min(r["depth"] for r in grid)) > 8:
        ax.set_xscale("log")
    ax.set_xlabel("depth L (layers)")
    ax.set_ylabel(LOSS_LABEL)
    title = "Loss vs depth per width"
    if curves:
        ax.plot([], [], style, color="grey", label=draw["label"])
        if alt:
            ax.plot([], [], "--", color="grey", label=alt["label"])
        title += f": {draw['label']}"
    ax.set_title(title, **({"fontsize": 9.5} if len(title) > 60 else {}))
    ax.legend(loc="best", ncol=2 if len(widths) > 5 else 1)
    if curves:
        cap = (
            f"points: measured (± sd over seeds); {'dashed' if style == '--' else 'solid'}: {draw['label']}"
            + (f", dashed: {alt['label']}" if alt else "")
            + " at each width's token budget"
        )
    else:
        cap = "points: measured (± sd over seeds); " + (
            f"the fitted {data.fit.law} law could not be drawn" if data.fit else "no fit.json, so no fitted curves"
        )
    if missing:
        cap += "; no fitted curve for " + "; ".join(f"W = {w} ({why})" for w, why in missing.items())
    if curves and draw.get("line"):  # what the verdict says of the drawn curve
        import textwrap

        ax.set_xlabel(ax.get_xlabel() + "\n" + textwrap.fill(draw["line"], 96), fontsize=8)
        cap += "; " + draw["line"]
    return _save(plt, fig, out, "loss_vs_depth.png", title, cap)


def grad_profiles(plt, data, rep, out):
    """Gradient persistence's gradient-profile figure, its module's (fit/analyses/gradient_persistence.py),
    from the runs' probe records."""
    return _analysis(plt, out, data.fit, "gradient_persistence", "grad_profiles", probes=data.probes)


def tau_vs_width(plt, data, rep, out):
    """Gradient persistence's τ(W) figure, its module's (fit/analyses/gradient_persistence.py)."""
    return _analysis(plt, out, data.fit, "gradient_persistence", "tau_vs_width", probes=data.probes)


def shape_profiles(plt, data, rep, out):
    rows = rep["tables"]["shapes"].rows
    runs = {(r["width"], r["depth"], r["shape"] or "uniform"): r for r in data.runs if r.get("widths")}
    groups = sorted({(r["width"], r["depth"]) for r in rows})
    if not groups:
        runs_any = [r for r in data.runs if r.get("widths") and r["shape"] not in (None, "uniform")]
        if not runs_any:
            return "no width-shape runs with per-layer widths"
        groups = sorted({(r["width"], r["depth"]) for r in runs_any})
    h, L = groups[-1]
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.0))
    n = 0
    for i, s in enumerate(SHAPE_ORDER):
        r = runs.get((h, L, s))
        if r is None:
            continue
        ws = r["widths"]
        ax.plot(
            np.arange(1, len(ws) + 1),
            ws,
            "--" if s == "uniform" else "o-",
            ms=4,
            color=f"C{i}",
            label=f"{SHAPE_LABEL[s]} (mean {np.mean(ws) / h:.2f}·h)",
        )
        n += 1
    if not n:
        plt.close(fig)
        return "no per-layer widths in the shape runs' summaries"
    ax.set_xlabel("layer i (1 = bottom)")
    inside_figs.layer_ticks(ax, L)
    ax.set_ylabel("layer width w_i (hidden units)")
    ax.set_title(f"Width profiles of the shape families (h = {h}, L = {L})")
    ax.legend(loc="best")
    return _save(
        plt,
        fig,
        out,
        "shape_profiles.png",
        f"Width profiles of the shape families (h = {h}, L = {L})",
        "per-layer widths as trained, matched in parameters to the uniform model",
    )


def loss_vs_flops(plt, data, rep, out):
    done = {r["run"]: r for r in data.runs if r["state"] == "done"}
    pts = [p for p in data.points if p["run"] in done and p["flops"]]
    if not pts:
        return "no finished runs with FLOPs"
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.2))
    shapes = sorted(
        {(done[p["run"]]["shape"] or "uniform") for p in pts},
        key=lambda s: SHAPE_ORDER.index(s) if s in SHAPE_ORDER else 99,
    )
    for s in shapes:
        i = SHAPE_ORDER.index(s) if s in SHAPE_ORDER else len(SHAPE_ORDER)
        ps = [p for p in pts if (done[p["run"]]["shape"] or "uniform") == s]
        by_run = {}
        for p in ps:
            by_run.setdefault(p["run"], []).append(p)
        for run, rp in by_run.items():
            rp.sort(key=lambda p: p["flops"])
            if len(rp) > 1:
                ax.plot([p["flops"] for p in rp], [p["loss"] for p in rp], "-", color=f"C{i}", lw=0.8, alpha=0.6)
            r = done[run]  # which line is which: depth × width at the run's last budget
            ax.annotate(
                f"{r['depth']}×{r['width']}",
                (rp[-1]["flops"], rp[-1]["loss"]),
                xytext=(3, 2),
                textcoords="offset points",
                fontsize=6,
                color=f"C{i}",
            )
        ax.scatter(
            [p["flops"] for p in ps],
            [p["loss"] for p in ps],
            color=f"C{i}",
            s=22,
            marker="o" if s == "uniform" else "D",
            label=SHAPE_LABEL.get(s, s),
            zorder=3,
        )
    ax.set_xscale("log")
    ax.set_xlabel("training compute C (FLOPs = FLOPs/token × tokens)")
    ax.set_ylabel(LOSS_LABEL)
    ax.set_title("Loss vs training compute per shape family")
    ax.legend(loc="best")
    return _save(
        plt,
        fig,
        out,
        "loss_vs_flops.png",
        "Loss vs training compute per shape family",
        "one point per run and token budget (lines join a run's budgets, labelled L×W at the last); "
        "FLOPs/token = 6N + attention",
    )


def fit_residuals(plt, data, rep, out):
    if not data.fit:
        return "no fit.json"
    rec = _record(data.fit)
    law = _law(rec)
    done = {r["run"] for r in data.runs if r["state"] == "done"}
    pts = [p for p in data.points if p["run"] in done and all(p.get(c) for c in law.columns)]
    pts, unread = _fitted(pts, data.fit.where)
    if not pts:
        return "no finished points with the law's columns"
    cols = {c: [p.get(c) for p in pts] for c in (*law.columns, "params_non_embedding")}
    pred = _predict(rec, cols, _convention(data.fit))
    y = np.array([p["loss"] for p in pts])
    res = y - pred
    W = np.array([p["width"] or 0 for p in pts])
    D = np.array([p["depth"] or 0 for p in pts])
    U = np.array([p["shape"] in (None, "uniform") for p in pts])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(WIDTH_IN, 3.4), sharey=True)
    ws = sorted(set(W))
    for w, col in zip(ws, _colors(len(ws))):
        for uni, mk in ((True, "o"), (False, "D")):
            m = (W == w) & (U == uni)
            if m.any():
                lab = f"W = {int(w)}" + ("" if uni else " (shaped)")
                a1.scatter(pred[m], res[m], color=col, s=18, marker=mk, label=lab)
                a2.scatter(D[m], res[m], color=col, s=18, marker=mk)
    for ax in (a1, a2):
        ax.axhline(0, color="k", lw=0.8)
    a1.set_xlabel("predicted loss (nats/token)")
    a1.set_ylabel("residual: measured − fit (nats)")
    a2.set_xlabel("depth L (layers)")
    a1.legend(loc="best", fontsize=7)
    rmse = float(np.sqrt(np.mean(res**2)))
    title = f"Fit residuals ({data.fit.law}, RMSE {rmse:.3g} nats)"
    fig.suptitle(title, fontsize=10.5)
    applied = [w for w in data.fit.where if w not in unread]
    which = (
        f"the finished points the fit used (--where {', '.join(applied)})" if applied else "every finished run's points"
    )
    if unread:
        which += f"; the fit's --where {', '.join(unread)} names a column the report does not hold: not applied here"
    if U.any() and not U.all():
        which += "; diamonds: width-shaped runs (W = their h), which the fit pools with the uniform ones"
    return _save(plt, fig, out, "fit_residuals.png", title, which)


def _fitted(points: list[dict], where: list[str]) -> tuple[list[dict], list[str]]:
    """(the points a fit's ``--where`` filters keep, the filters on a column the points lack), as the
    fit kept its rows (fit/table.py: ``apply_where``; ``shape=uniform`` with the shapes a table writes
    for the uniform model).  A shape-blind law fitted on a store of shapes keeps its uniform runs:
    the residuals of runs it never saw are not its misfit."""
    import pandas as pd

    from depthwidth.core.errors import BadInput
    from depthwidth.fit.table import UNIFORM, apply_where

    unread, rest = [], []
    for w in where:
        col, _, val = str(w).partition("=")
        if col.strip() == "shape" and val.strip() == "uniform":
            points = [p for p in points if str(p["shape"]) in UNIFORM]
        elif points and col.strip() in points[0]:
            rest.append(w)
        else:
            unread.append(w)
    if rest and points:
        try:
            points = [points[i] for i in apply_where(pd.DataFrame(points), rest).index]
        except BadInput:  # no point left
            points = []
    return points, unread


def flops_match_curves(plt, data, rep, out):
    """FLOPs to match uniform's figure, its module's (fit/analyses/match.py), from the report's match
    tables (match.json or the match report/matching.py computed) and each run's final point."""
    return _analysis(
        plt, out, data.fit, "match", "flops_match_curves", tables=rep["tables"], points=lambda: run_frame(data)
    )


def isoflop_profiles(plt, data, rep, out):
    """The isoFLOP analysis's figure, its module's (fit/analyses/isoflop.py)."""
    return _analysis(plt, out, data.fit, "isoflop", "isoflop_profiles")


def accuracy_vs_loss(plt, data, rep, out):
    """The downstream analysis's figure, its module's (fit/analyses/downstream.py), from the report's
    downstream table (each finished run's eval.json: report/downstream.py)."""
    return _analysis(plt, out, data.fit, "downstream", "accuracy_vs_loss", tables=rep["tables"])
