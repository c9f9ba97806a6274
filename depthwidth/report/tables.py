"""The tables of ``dw report``, built from a :class:`depthwidth.report.Data`.

Each builder returns a :class:`depthwidth.report.Table`: raw rows for json/csv,
a display (optionally pivoted) for rich/markdown.  Published numbers sit in
columns labelled *paper*, ours in columns labelled *measured*.
"""

from __future__ import annotations

import math

from depthwidth.core.errors import bad
from depthwidth.core.tables import Col, Table
from depthwidth.model.shapes import MATCH_TOLERANCE  # a shape more than 1% off the uniform model's is not "matched"
from depthwidth.report.document import (
    DONE,
    SCHEMA,
    SHAPES,
    Data,
    group_cells,
    split_conflicts,
    is_uniform,
    paper_loss,
    papers_grid,
    pm,
)
from depthwidth.report.downstream import table as downstream_table
from depthwidth.report.inside import tables as inside_tables
from depthwidth.report.matching import tables as match_tables
from depthwidth.fit.result import FitDocument
from depthwidth.report.fit_view import fit_tables, halving_table, paper_table
from depthwidth.report.provenance import provenance_table
from depthwidth.report.router import router_table

# =============================================================================
# the report
# =============================================================================


def build(data: Data, at_width: int | None = None, at_depth: int | None = None) -> dict:
    T = {}
    tuned_note = _best_picks(data)
    data.runs, apart = split_conflicts(data.runs)  # never average runs that differ in more than the seed
    if apart:
        gone = {r["run"] for r in apart}
        data.points = [p for p in data.points if p["run"] not in gone]
        data.analyses = [a for a in data.analyses if a["run"] not in gone]  # the inside table averages none either
        T["apart"] = _apart(apart, data.source.get("sweep"))
    uni = [r for r in data.runs if is_uniform(r)]
    cells = group_cells(uni)
    T["loss_grid"] = _grid(uni, cells)
    if tuned_note:
        T["loss_grid"].notes.insert(0, tuned_note)
    w_star = _pick(cells, 1, at_width, "--at-width", "width")
    d_star = _pick(cells, 0, at_depth, "--at-depth", "depth")
    paper_by_cell = {}
    for r in data.runs:
        pl, pp, src = paper_loss(r)
        if pl is not None and is_uniform(r) and r["depth"] is not None:
            paper_by_cell[(r["depth"], r["width"])] = pl
    T["u_shape"] = _ushape(cells, w_star, paper_by_cell)
    T["width_sweep"] = _wsweep(cells, d_star, paper_by_cell)
    T["pairs"] = _pairs(cells, paper_by_cell)
    T["shapes"] = _shapes(data.runs)
    T.update(fit_tables(data.fit, {k[1] for k in cells}, data.probes))  # report/fit_view.py: dw fit prints these
    if "fit" in T and (late := ended_after(data, data.fit)):
        T["fit"].notes.insert(0, late)
    T.update(match_tables(data))  # FLOPs to match uniform (report/matching.py)
    T["paper"] = paper_table(data.runs)
    if (router := router_table(data.probes)) is not None:
        T["router"] = router
    if data.analyses:  # runs analysed by dw analyze (analysis.json)
        T.update(inside_tables(data.analyses))
    if data.evals:  # runs evaluated by dw eval (eval.json)
        T["downstream"] = downstream_table(data)
    if data.halving:  # a tuned sweep with tune.halving: each group's decision and the compute saved
        T["halving"] = halving_table(data.halving)
    T["missing"] = _missing(data, w_star, d_star)
    notes = list(data.notes)
    if data.source.get("sweep"):
        T["provenance"], mixed = provenance_table(data.runs, data.fit)
        notes += [f"provenance: {w}" for w in mixed]
    if data.fit is None:
        notes.append(
            "no fit.json: the fit and D_crit-from-the-law tables and the fitted curves are absent "
            + (
                f"(run: dw fit {data.source['sweep']} --law depth-delusion)"
                if data.source.get("sweep")
                else "(pass --fit FILE)"
            )
        )
    counts = {}
    for r in data.runs:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    return {
        "schema": SCHEMA,
        "source": data.source,
        "runs": len(data.runs),
        "states": counts,
        "papers_grid": papers_grid(data),
        "at_width": w_star,
        "at_depth": d_star,
        "tables": T,
        "notes": notes,
        "figures": [],
    }


def _best_picks(data: Data) -> str | None:
    """A tuned sweep: keep each tuning group's best run (the pick ``dw fit --tuned best`` makes) and
    set the runs at its other values aside, so a cell's loss is its group's best; the grid's note."""
    t = data.tuned
    if not t:
        return None
    others = set(t["others"])
    data.runs = [r for r in data.runs if r["run"] not in others]
    data.points = [p for p in data.points if p["run"] not in others]
    data.analyses = [a for a in data.analyses if a["run"] not in others]
    return (
        f"tuned sweep: each cell shows its tuning group's best run over {t['key']} (the pick dw fit --tuned best "
        f"makes); {len(others)} runs at other values of {t['key']} are left out of these tables"
    )


def _apart(apart, sweep) -> Table:
    rows = [
        {
            "run": r["run"],
            "depth": r["depth"],
            "width": r["width"],
            "shape": r["shape"] or "uniform",
            "state": r["state"],
            "loss": r["loss"],
            "differs": r["differs"],
        }
        for r in apart
    ]
    cols = [
        Col("run", "run"),
        Col("depth", "L"),
        Col("width", "W"),
        Col("shape", "shape"),
        Col("state", "state"),
        Col("loss", "loss", "{:.4f}"),
        Col("differs", "differs from its cell by"),
    ]
    t = Table(
        "apart", "Runs set apart: they differ from the other runs of their cell in more than the seed", cols, rows
    )
    t.notes.append(
        "not averaged into any cell of the tables or figures (dw fit uses them: its law has the tokens)"
        + (f"; dw forget {sweep} RUN_ID… leaves them out of the sweep for good (nothing is deleted)" if sweep else "")
    )
    return t


def _pick(cells, axis, want, opt, what):
    vals = sorted({k[axis] for k in cells})
    if want is not None:
        if want not in vals:
            raise bad(opt, want, f"a {what} with finished runs: {', '.join(map(str, vals)) or 'none yet'}")
        return want
    if not vals:
        return None
    other = 1 - axis
    return max(vals, key=lambda v: (sum(1 for k in cells if k[axis] == v and k[other] is not None), v))


def _grid(uni, cells) -> Table:
    rows = []
    best = {}
    for (d, w), c in cells.items():
        if w not in best or c["loss"] < cells[(best[w], w)]["loss"]:
            best[w] = d
    for (d, w), c in sorted(cells.items()):
        rows.append(
            {
                "depth": d,
                "width": w,
                "loss": c["loss"],
                "sd": c["sd"],
                "seeds": c["seeds"],
                "params": c["params"],
                "params_non_embedding": c["params_non_embedding"],
                "tokens": c["tokens"],
                "best": best.get(w) == d,
                "state": "done",
            }
        )
    for r in uni:  # cells with no finished run: show what they are waiting for
        if r["depth"] is None or r["width"] is None or (r["depth"], r["width"]) in cells:
            continue
        if any(x["depth"] == r["depth"] and x["width"] == r["width"] for x in rows):
            continue
        rows.append(
            {
                "depth": r["depth"],
                "width": r["width"],
                "loss": None,
                "sd": None,
                "seeds": 0,
                "params": r["params"],
                "tokens": None,
                "best": False,
                "state": r["state"],
            }
        )

    def cell(r):
        if r["loss"] is None:
            return f"({r['state']})"
        return pm(r["loss"], r["sd"]) + (" *" if r["best"] else "")

    cols = [
        Col("depth", "depth", "{}"),
        Col("width", "width", "{}"),
        Col("loss", "loss (nats)", "{:.4f}"),
        Col("sd", "sd", "{:.4f}"),
        Col("seeds", "seeds"),
        Col("params", "params", "{:.4g}"),
        Col("tokens", "tokens", "{:.4g}"),
        Col("best", "best depth"),
        Col("state", "state"),
    ]
    t = Table(
        "loss_grid",
        "Held-out loss (nats/token), depth × width, uniform runs",
        cols,
        rows,
        pivot={
            "index": "depth",
            "columns": "width",
            "cell": cell,
            "index_label": "depth \\ width",
            "column_label": "W=",
        },
    )
    t.notes.append(
        "* best depth at that width; mean ± sd over seeds where a cell has several; (state) a cell with no finished run"
    )
    toks = sorted({r["tokens"] for r in rows if r["tokens"] is not None})
    if len(toks) > 1:
        t.notes.append(f"final token budgets differ across cells ({toks[0]:.3g} to {toks[-1]:.3g} tokens)")
    if not rows:
        t.notes.append("no uniform runs")
    return t


def _delta_rows(cs):
    if not cs:
        return cs
    lo = min(c["loss"] for c in cs)
    for c in cs:
        c["delta_best"] = c["loss"] - lo
    return cs


# A measured ordering of cells is said of the world only beyond seed scatter: with several seeds in some cells,
# their pooled seed-to-seed spread of log loss judges each difference (one-sided t tests, Bonferroni over the
# candidates a line picks among); with one seed everywhere nothing is judged and the line says so.  Before, an
# interior minimum read "a U-shape" in 35% of planted grids without one, and every pair had a winner
# (benchmarks/bench_verdicts.py, kinds ushape, wmono, pairs).
SCATTER_LEVEL = 0.05
ONE_SEED = "one seed per cell: not told from seed scatter; seeds can"


def seed_scatter(cells) -> tuple[float, int] | None:
    """(pooled seed-to-seed sd of log loss, its degrees of freedom) over the cells run with several seeds;
    None when no cell has two."""
    num = dof = 0.0
    for c in cells.values():
        if (c.get("seeds") or 0) >= 2 and c.get("sd") is not None and c.get("loss"):
            num += (c["seeds"] - 1) * (c["sd"] / c["loss"]) ** 2
            dof += c["seeds"] - 1
    return (math.sqrt(num / dof), int(dof)) if dof else None


def beyond_scatter(lo: dict, hi: dict, scatter: tuple[float, int], level: float) -> bool:
    """Whether cell ``hi``'s loss lies above cell ``lo``'s beyond seed scatter (one-sided t at ``level``)."""
    from scipy import stats

    s, dof = scatter
    se = s * math.sqrt(1 / lo["seeds"] + 1 / hi["seeds"])
    gap = math.log(hi["loss"]) - math.log(lo["loss"])
    return se > 0 and gap > float(stats.t.ppf(1 - level, dof)) * se


def _ushape(cells, w, paper) -> Table:
    cs = [dict(c, paper_loss=paper.get((c["depth"], c["width"]))) for k, c in sorted(cells.items()) if k[1] == w]
    _delta_rows(cs)
    cols = [
        Col("depth", "depth"),
        Col("params", "params", "{:.4g}"),
        Col("loss", "loss measured (nats)", "{:.4f}"),
        Col("sd", "sd", "{:.4f}"),
        Col("seeds", "seeds"),
        Col("delta_best", "Δ vs best", "{:+.4f}"),
    ]
    if any(c["paper_loss"] is not None for c in cs):
        cols.append(Col("paper_loss", "loss paper", "{:.3f}"))
    t = Table(
        "u_shape",
        f"Loss vs depth at width {w} (the U-shape)" if w is not None else "Loss vs depth (the U-shape)",
        cols,
        _strip(cs, cols),
    )
    if len(cs) >= 3:
        i = min(range(len(cs)), key=lambda j: cs[j]["loss"])
        scatter = seed_scatter(cells)
        if not 0 < i < len(cs) - 1:
            line = f"minimum at the {'shallowest' if i == 0 else 'deepest'} depth: no U-shape in this range"
        elif scatter is None:
            line = f"lowest measured loss at depth {cs[i]['depth']}, inside the depth range ({ONE_SEED})"
        elif all(beyond_scatter(cs[i], cs[j], scatter, SCATTER_LEVEL / (len(cs) - 2)) for j in (0, len(cs) - 1)):
            line = (
                f"minimum inside the depth range: a U-shape (depth {cs[i]['depth']}; both ends above it beyond "
                f"seed scatter, σ = {scatter[0]:.3g} in log loss)"
            )
        else:
            line = (
                f"lowest measured loss at depth {cs[i]['depth']}, inside the depth range, but an end lies within "
                f"seed scatter of it (σ = {scatter[0]:.3g} in log loss): no U-shape shown"
            )
        t.notes.append(line)
    if not cs:
        t.notes.append("no finished uniform runs")
    return t


def _wsweep(cells, d, paper) -> Table:
    cs = [dict(c, paper_loss=paper.get((c["depth"], c["width"]))) for k, c in sorted(cells.items()) if k[0] == d]
    for a, b in zip(cs, cs[1:]):
        b["delta_prev"] = b["loss"] - a["loss"]
    cols = [
        Col("width", "width"),
        Col("params", "params", "{:.4g}"),
        Col("loss", "loss measured (nats)", "{:.4f}"),
        Col("sd", "sd", "{:.4f}"),
        Col("seeds", "seeds"),
        Col("delta_prev", "Δ vs narrower", "{:+.4f}"),
    ]
    if any(c["paper_loss"] is not None for c in cs):
        cols.append(Col("paper_loss", "loss paper", "{:.3f}"))
    t = Table(
        "width_sweep", f"Loss vs width at depth {d}" if d is not None else "Loss vs width", cols, _strip(cs, cols)
    )
    if len(cs) >= 2:
        rises = [(a, b) for a, b in zip(cs, cs[1:]) if b["loss"] >= a["loss"]]
        scatter = seed_scatter(cells)
        said = ", ".join(f"W {a['width']} → {b['width']} {b['loss'] - a['loss']:+.4f} nats" for a, b in rises)
        if not rises:
            line = "loss falls monotonically with width"
        elif scatter is None:
            line = f"measured loss does not fall monotonically with width ({said}; {ONE_SEED})"
        elif any(beyond_scatter(a, b, scatter, SCATTER_LEVEL / (len(cs) - 1)) for a, b in rises):
            line = f"loss does NOT fall monotonically with width ({said}; beyond seed scatter, σ = {scatter[0]:.3g})"
        else:
            line = f"loss falls with width within seed scatter (measured {said}; σ = {scatter[0]:.3g} in log loss)"
        t.notes.append(line)
    return t


def _strip(cs, cols):
    keys = [c.key for c in cols]
    return [{k: c.get(k) for k in keys} for c in cs]


def _pairs(cells, paper, lo=0.5, hi=2.0, limit=12) -> Table:
    """Each deep-narrow cell against the shallow-wide cell closest to it in parameters (ratio in [lo, hi])."""
    rows = []
    scatter = seed_scatter(cells)
    for (db, wb), b in sorted(cells.items()):
        best = None
        for (da, wa), a in cells.items():
            if not (da < db and wa > wb) or not a["params"] or not b["params"]:
                continue
            ratio = a["params"] / b["params"]
            if lo <= ratio <= hi and (best is None or abs(math.log(ratio)) < abs(math.log(best[1]))):
                best = (a, ratio)
        if best is None:
            continue
        a, ratio = best
        fr = (a["flops_per_token"] / b["flops_per_token"]) if a["flops_per_token"] and b["flops_per_token"] else None
        rows.append(
            {
                "shallow_wide": f"{a['depth']}L×{a['width']}",
                "sw_params": a["params"],
                "sw_loss": a["loss"],
                "deep_narrow": f"{b['depth']}L×{b['width']}",
                "dn_params": b["params"],
                "dn_loss": b["loss"],
                "params_ratio": ratio,
                "flops_ratio": fr,
                "delta_loss": b["loss"] - a["loss"],
                "winner": _winner(a, b, scatter),
                "sw_paper": paper.get((a["depth"], a["width"])),
                "dn_paper": paper.get((b["depth"], b["width"])),
            }
        )
    rows.sort(key=lambda r: abs(math.log(r["params_ratio"])))
    rows = rows[:limit]
    cols = [
        Col("shallow_wide", "shallow-wide"),
        Col("sw_params", "params", "{:.4g}"),
        Col("sw_loss", "loss measured", "{:.4f}"),
        Col("deep_narrow", "deep-narrow"),
        Col("dn_params", "params", "{:.4g}"),
        Col("dn_loss", "loss measured", "{:.4f}"),
        Col("params_ratio", "params SW/DN", "{:.3f}"),
        Col("flops_ratio", "FLOPs/token SW/DN", "{:.3f}"),
        Col("delta_loss", "Δloss DN−SW", "{:+.4f}"),
        Col("winner", "winner"),
    ]
    if any(r["sw_paper"] is not None or r["dn_paper"] is not None for r in rows):
        cols += [Col("sw_paper", "SW loss paper", "{:.3f}"), Col("dn_paper", "DN loss paper", "{:.3f}")]
    t = Table("pairs", "Shallow-wide vs deep-narrow (closest in parameters)", cols, _strip(rows, cols))
    t.notes.append(
        f"each deep-narrow cell paired with the shallower, wider cell nearest in total parameters "
        f"(ratio within [{lo}, {hi}]); ratios > 1 mean the shallow-wide model is bigger"
    )
    if rows and scatter is None:
        sw = sum(r["delta_loss"] > 0 for r in rows)
        t.notes.append(f"shallow-wide has the lower measured loss in {sw} of {len(rows)} pairs ({ONE_SEED})")
    elif rows:
        n = {w: sum(r["winner"] == w for r in rows) for w in ("shallow-wide", "deep-narrow")}
        t.notes.append(
            f"shallow-wide better in {n['shallow-wide']}, deep-narrow in {n['deep-narrow']}, neither beyond seed "
            f"scatter (σ = {scatter[0]:.3g} in log loss, two-sided 5%) in {len(rows) - sum(n.values())} of "
            f"{len(rows)} pairs"
        )
    return t


def _winner(a: dict, b: dict, scatter) -> str | None:
    """The pair's better cell when its loss is lower beyond seed scatter (two-sided), "within scatter"
    otherwise, None with one seed per cell."""
    if scatter is None:
        return None
    if beyond_scatter(a, b, scatter, SCATTER_LEVEL / 2):
        return "shallow-wide"
    if beyond_scatter(b, a, scatter, SCATTER_LEVEL / 2):
        return "deep-narrow"
    return "within scatter"


def _shapes(runs) -> Table:
    cells = group_cells(runs, key=lambda r: (r["width"], r["depth"], r["shape"] or "uniform"))
    groups = {}
    for (w, d, s), c in cells.items():
        groups.setdefault((w, d), {})[s] = c
    rows = []
    for (w, d), fam in sorted(groups.items()):
        if all(s == "uniform" for s in fam):
            continue
        u = fam.get("uniform")
        for s in sorted(fam, key=lambda s: (SHAPES.index(s) if s in SHAPES else 99, s)):
            c = fam[s]
            mw = sum(c["widths"]) / len(c["widths"]) if c.get("widths") else None

            def ratio(k):
                return c[k] / u[k] if u and c.get(k) and u.get(k) else None

            rows.append(
                {
                    "width": w,
                    "depth": d,
                    "shape": s,
                    "loss": c["loss"],
                    "sd": c["sd"],
                    "seeds": c["seeds"],
                    "params": c["params"],
                    "flops_per_token": c["flops_per_token"],
                    "kv_bytes_per_token": c["kv_bytes_per_token"],
                    "mean_width_over_h": mw / w if mw else None,
                    "delta_loss": c["loss"] - u["loss"] if u else None,
                    "params_ratio": ratio("params"),
                    "flops_ratio": ratio("flops_per_token"),
                    "kv_ratio": ratio("kv_bytes_per_token"),
                }
            )
    cols = [
        Col("width", "h"),
        Col("depth", "L"),
        Col("shape", "shape"),
        Col("loss", "loss measured", "{:.4f}"),
        Col("sd", "sd", "{:.4f}"),
        Col("delta_loss", "Δloss vs uniform", "{:+.4f}"),
        Col("params", "params", "{:.4g}"),
        Col("params_ratio", "params ×unif", "{:.3f}"),
        Col("flops_per_token", "FLOPs/token", "{:.4g}"),
        Col("flops_ratio", "FLOPs ×unif", "{:.3f}"),
        Col("kv_bytes_per_token", "KV bytes/token", "{:.4g}"),
        Col("kv_ratio", "KV ×unif", "{:.3f}"),
        Col("mean_width_over_h", "mean width / h", "{:.3f}"),
    ]
    t = Table(
        "shapes", "Width-shape families at matched parameters (vs the uniform model of the same h, L)", cols, rows
    )
    off = [r for r in rows if r["params_ratio"] is not None and abs(r["params_ratio"] - 1) > MATCH_TOLERANCE]
    if off:
        t.notes.insert(
            0,
            "warning: not matched in parameters: "
            + ", ".join(f"{r['shape']} {r['params_ratio']:.3f}× (h {r['width']}, L {r['depth']})" for r in off)
            + " the uniform model's: their Δloss mixes shape and size (lower model.quantum: exact matching reaches "
            "0.5% where the quantum leaves room)",
        )
    t.notes.append("paper (Wu et al., 500M): × 3.099 vs uniform 3.138 nats; mean width ≈ 0.89·h, ≈ 10% less KV cache")
    if not rows:
        t.notes.append("no finished non-uniform runs")
    return t


def ended_after(data, fit: FitDocument) -> str | None:
    """A warning when runs of the sweep ended after the fit shown was made (its fit.json is older
    than their summary.json): the report's tables have them, the fit does not."""
    import datetime as dt
    import os

    made, d = fit.provenance.get("time"), data.source.get("dir")
    try:
        t = dt.datetime.strptime(made, "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except (TypeError, ValueError):
        return None
    late = []
    for r in data.runs:
        try:
            # the fit's time is whole seconds: a second's slack for summaries written just before it
            if r["state"] == "done" and os.path.getmtime(os.path.join(d, str(r["run"]), "summary.json")) > t + 1:
                late.append(r["run"])
        except (OSError, TypeError):
            continue
    if not late:
        return None
    return (
        f"warning: {len(late)} run{'s' * (len(late) != 1)} ended after this fit was made ({made}): "
        f"it does not have them; refit with dw fit {data.source.get('sweep') or 'NAME'}"
    )


def _missing(data: Data, w_star, d_star) -> Table:
    rows = []
    for r in data.runs:
        if r["state"] in DONE and r["loss"] is not None:
            continue
        aff = []
        if is_uniform(r) and r["depth"] is not None:
            aff.append(f"loss grid ({r['depth']}L×{r['width']})")
            if r["width"] == w_star:
                aff.append("U-shape")
            if r["depth"] == d_star:
                aff.append("width sweep")
            aff.append("pairs")
        else:
            aff.append(f"shapes (h={r['width']}, L={r['depth']})")
        if paper_loss(r)[0] is not None:
            aff.append("paper comparison")
        aff.append("fit")
        cfg = "?" if r["depth"] is None else f"{r['depth']}L×{r['width']}" + ("" if is_uniform(r) else f" {r['shape']}")
        if r.get("seed") is not None:
            cfg += f" seed {r['seed']}"
        state = r["state"] if r["state"] not in DONE else "done, no loss"
        rows.append(
            {
                "run": r["run"],
                "label": r.get("label"),
                "config": cfg,
                "state": state,
                "reason": r.get("reason"),
                "incomplete": ", ".join(aff),
            }
        )
    cols = [
        Col("run", "run"),
        Col("label", "label"),
        Col("config", "config"),
        Col("state", "state"),
        Col("reason", "reason"),
        Col("incomplete", "leaves incomplete"),
    ]
    t = Table("missing", "What is missing: runs not done", cols, rows)
    if not rows:
        t.notes.append(f"nothing: all {len(data.runs)} runs are done")
    else:
        by = {}
        for r in rows:
            by[r["state"]] = by.get(r["state"], 0) + 1
        t.notes.append(", ".join(f"{n} {s}" for s, n in sorted(by.items())) + f" of {len(data.runs)} runs")
    return t
