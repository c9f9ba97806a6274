"""Derived numbers outside the physically meaningful range read "not identified" in the report.

The compute-optimal allocation gets its own table (``fit_optimal``); D_crit
values below one layer in the D_crit tables are replaced by "not identified"
(their intervals blanked).  The flags come from fit.json's
``identification.optimum`` / ``identification.dcrit_range`` (fit/identify.py),
recomputed from ``derived`` for a fit.json written before they existed.
"""

from __future__ import annotations

from depthwidth.fit.identify import meaningful_dcrit, meaningful_optimum
from depthwidth.report.model import Col, Table

NOT_IDENTIFIED = "not identified"
LABELS = {"N_exponent": "N* ∝ C^x", "T_exponent": "T* ∝ C^y", "D_exponent": "D* ∝ C^a", "W_exponent": "W* ∝ C^b"}


def flags(fit: dict) -> tuple[dict, dict]:
    """(optimum flags, D_crit flags) of a fit document."""
    ident = fit.get("identification") or {}
    derived = fit.get("derived") or {}
    return ident.get("optimum") or meaningful_optimum(derived), ident.get("dcrit_range") or meaningful_dcrit(derived)


def optimal_tables(T: dict, fit: dict | None) -> dict:
    """Mark the D_crit tables in ``T`` in place; return {"fit_optimal": Table} when the fit has optima."""
    if not fit:
        return {}
    opt, dcr = flags(fit)

    def bad(key):
        return not dcr.get(key, {}).get("identified", True)

    for key, name, cols in (("dcrit_widths", "width", ("law",)), ("dcrit_models", "model", ("measured", "depth_over_dcrit"))):
        for r in T[key].rows if key in T else []:
            k = f"dcrit[W={r[name]}]" if name == "width" else f"dcrit[{r[name]}]"
            if bad(k):
                r.update({c: NOT_IDENTIFIED for c in cols}, ci_lo=None, ci_hi=None)
    if any(bad(k) for k in dcr):
        for key in ("dcrit_widths", "dcrit_models"):
            if key in T:
                T[key].notes.append("not identified: the law's D_crit is below one layer there")
    co = (fit.get("derived") or {}).get("compute_optimal")
    if not co:
        return {}
    rows = []
    for k, v in co.items():
        if k in ("ci", "constraint", "c_ref", "tie_break", "n_convention") or not isinstance(v, (int, float)):
            continue
        ok = opt.get(k, {}).get("identified", True)
        lo, hi = (co.get("ci") or {}).get(k) or (None, None)
        rows.append({"quantity": LABELS.get(k, f"{k} at C = {co['c_ref']:.0e}"), "value": v if ok else NOT_IDENTIFIED,
                     "ci_lo": lo if ok else None, "ci_hi": hi if ok else None,
                     "note": None if ok else opt[k].get("because")})
    cols = [Col("quantity", "quantity"), Col("value", "measured", "{:.4g}"), Col("ci_lo", "CI lo", "{:.4g}"),
            Col("ci_hi", "CI hi", "{:.4g}"), Col("note", "not identified because")]
    t = Table("fit_optimal", f"Compute-optimal allocation derived from the law ({co.get('constraint')})", cols, rows)
    if co.get("tie_break"):
        t.notes.append(f"tie-break: {co['tie_break']}")
    claim = (fit.get("identification") or {}).get("claim") or {}
    if claim.get("identified") is False:  # every optimum is derived from the law's claim-carrying parameters
        t.notes.insert(0, f"warning: derived from {claim.get('parameter')}, which the fit does not identify "
                          f"({claim.get('because')}): these optima are not identified either")
    return {"fit_optimal": t}
