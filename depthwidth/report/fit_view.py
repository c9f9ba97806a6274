"""Every table of one fit (fit.json), as ``dw report`` shows it and ``dw fit`` prints it: the
parameters, the law comparison, what the fit rests on (report/rests.py), D_crit (report/papers.py)
and the compute-optimal allocation (report/optima.py).  One rendering of each: ``dw fit`` builds
its output here rather than drawing tables of its own.  The verdicts are the ones ``dw fit`` decided
and stored (fit.json's ``verdicts``, fit/result.py): read here, never decided again."""

from __future__ import annotations

from depthwidth.core.tables import Col, Table, ci_pair
from depthwidth.fit.papers import DD_FIT, DD_KAPPA, DD_TAU_EXPONENT, DD_TAU_R2
from depthwidth.fit.analyses import tables as analysis_tables
from depthwidth.fit.result import FitDocument
from depthwidth.report.optima import optimal_tables
from depthwidth.report.papers import dcrit_tables
from depthwidth.report.rests import fit_notes, rest_tables

EXCLUDED_SHOWN = 20  # excluded runs named in the fit table's notes; the rest counted


def fit_tables(fit: FitDocument | None, widths=(), probes=()) -> dict[str, Table]:
    """{key: Table} of ``fit`` (None: the D_crit tables from ``probes`` alone; a document without a
    fitted law: its sections' tables); ``widths`` and ``probes`` (a sweep's) add rows to the D_crit tables."""
    T = {}
    if fit is not None and fit.law:
        T["fit"] = parameter_table(fit)
        T.update(analysis_tables(fit, ("compare",)))
    T.update(rest_tables(fit))
    T.update(dcrit_tables(fit, widths, probes))
    T.update(optimal_tables(T, fit))  # "not identified" for optima and D_crit outside the meaningful range
    return T


def parameter_table(fit: FitDocument) -> Table:
    """The law's parameters with their intervals, the paper's values for the Depth Delusion law,
    goodness of fit and gradient persistence's exponent."""
    dd = fit.law == "depth-delusion"
    paper = {"alpha": DD_FIT["alpha"], "kappa": DD_KAPPA} if dd else {}
    flags = fit.verdicts.parameters
    rows = []
    for k, v in fit.params.items():
        lo, hi = ci_pair(fit.ci.get(k))
        rows.append(
            {
                "quantity": k,
                "measured": v,
                "ci_lo": lo,
                "ci_hi": hi,
                "paper": paper.get(k),
                "flags": ", ".join(flags.get(k, [])) or None,
            }
        )
    rows.append({"quantity": "R²", "measured": fit.r2, "paper": DD_FIT["r2"] if dd else None})
    rows.append({"quantity": "RMSE (nats)", "measured": fit.rmse, "paper": DD_FIT["rmse"] if dd else None})
    rows.append({"quantity": "points / runs", "measured": f"{fit.n} / {fit.n_runs}"})
    gp = fit.sections.get("gradient_persistence") or {}
    if tl := gp.get("tau_law"):
        lo, hi = ci_pair(tl.get("p_ci"))
        rows.append(
            {
                "quantity": "τ(W) ∝ W^p: p",
                "measured": tl.get("p"),
                "ci_lo": lo,
                "ci_hi": hi,
                "paper": DD_TAU_EXPONENT,
            }
        )
        rows.append({"quantity": "τ(W) fit R²", "measured": tl.get("r2"), "paper": DD_TAU_R2})
    b = fit.bootstrap
    lvl = f"{100 * b.get('level', 0.95):.0f}%"
    cols = [
        Col("quantity", "quantity"),
        Col("measured", "measured", "{:.4g}"),
        Col("ci_lo", f"{lvl} CI lo" + (f" ({b['resample']})" if b.get("resample") else ""), "{:.4g}"),
        Col("ci_hi", f"{lvl} CI hi", "{:.4g}"),
    ]
    if dd:
        cols.append(Col("paper", "paper", "{:.4g}"))
    cols.append(Col("flags", "flags"))
    t = Table("fit", f"Fit: {fit.law} — {fit.formula}", cols, rows)
    t.notes.append(
        f"the fit shown: {fit.verdicts.label} of {', '.join(fit.where) or 'every run'}, "
        f"N = {fit.n_convention.get('name', 'total')}, made "
        f"{fit.provenance.get('time', 'at an unknown time')} (its fit.json; a fit of another law "
        "or filter replaces it only with dw fit --force)"
    )
    if s := fit.starts:
        t.notes.append(
            f"starts: {s['converged']}/{s['total']} converged, {s['in_best_basin']} in the best basin; Huber "
            f"objective {fit.objective:.6g}"
        )
    t.notes += fit_notes(fit)
    if ex := fit.excluded:
        named = "; ".join(f"{e['run']} ({e['points']} pts, {e['reason']})" for e in ex[:EXCLUDED_SHOWN])
        t.notes.append(
            f"excluded: {named}" + (f" and {len(ex) - EXCLUDED_SHOWN} more" if len(ex) > EXCLUDED_SHOWN else "")
        )
    if dd:
        t.notes.append(
            f"paper (Depth Delusion): alpha {DD_FIT['alpha']} [{DD_FIT['alpha_ci'][0]}, {DD_FIT['alpha_ci'][1]}], "
            f"kappa {DD_KAPPA}, R² {DD_FIT['r2']}, RMSE {DD_FIT['rmse']} nats on training loss"
        )
    return t
