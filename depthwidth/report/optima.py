"""Derived numbers outside the physically meaningful range read "not identified" in the report.

The compute-optimal allocation gets its own table (``optimal_table``, which
``dw fit`` prints too); D_crit values below one layer in the D_crit tables are
replaced by "not identified" (``mark_dcrit``: their intervals blanked).  Which
numbers are identified is decided when the fit is made (fit/verdicts.py's ``flags`` and
``optima_caveat``, stored in fit.json's ``verdicts``); this module only shows it.
"""

from __future__ import annotations

from depthwidth.fit.result import FitDocument
from depthwidth.core.tables import NOT_IDENTIFIED, Col, Table

LABELS = {"N_exponent": "N* ∝ C^x", "T_exponent": "T* ∝ C^y", "D_exponent": "D* ∝ C^a", "W_exponent": "W* ∝ C^b"}
NOT_NUMBERS = ("ci", "constraint", "c_ref", "tie_break", "n_convention")  # compute_optimal's keys that are no row


def optimal_tables(T: dict, fit: FitDocument | None) -> dict:
    """Mark the D_crit tables in ``T`` in place; return {"fit_optimal": Table} when the fit has optima."""
    if fit is None:
        return {}
    mark_dcrit(T, fit)
    t = optimal_table(fit)
    return {"fit_optimal": t} if t is not None else {}


def mark_dcrit(T: dict, fit: FitDocument) -> None:
    """The rows of the D_crit tables in ``T`` whose D_crit is below one layer read "not identified"."""
    dcr = fit.verdicts.dcrit_range

    def bad(key):
        return not dcr.get(key, {}).get("identified", True)

    for key, name, cols in (
        ("dcrit_widths", "width", ("law",)),
        ("dcrit_models", "model", ("measured", "depth_over_dcrit")),
    ):
        for r in T[key].rows if key in T else []:
            k = f"dcrit[W={r[name]}]" if name == "width" else f"dcrit[{r[name]}]"
            if bad(k):
                r.update({c: NOT_IDENTIFIED for c in cols}, ci_lo=None, ci_hi=None)
    if any(bad(k) for k in dcr):
        for key in ("dcrit_widths", "dcrit_models"):
            if key in T:
                T[key].notes.append("not identified: the law's D_crit is below one layer there")
    far = [r["model"] for r in T["dcrit_models"].rows if bad(f"dcrit[{r['model']}]")] if "dcrit_models" in T else []
    if far:  # dw fit leaves these rows out (cli/fit.py): on one's own small grid they are noise
        T["dcrit_models"].notes.append(
            f"not identified this far from the sweep's widths: {', '.join(far)} (fit.json keeps them)"
        )


def optimal_table(fit: FitDocument) -> Table | None:
    """The compute-optimal allocation derived from the law, or None when the fit has none."""
    co = fit.derived.get("compute_optimal")
    if not co:
        return None
    opt = fit.verdicts.optimum
    rows = []
    for k, v in co.items():
        if k in NOT_NUMBERS or not isinstance(v, (int, float)):
            continue
        ok = opt.get(k, {}).get("identified", True)
        lo, hi = (co.get("ci") or {}).get(k) or (None, None)
        rows.append(
            {
                "quantity": LABELS.get(k, f"{k} at C = {co['c_ref']:.0e}"),
                "value": v if ok else NOT_IDENTIFIED,
                "ci_lo": lo if ok else None,
                "ci_hi": hi if ok else None,
                "note": None if ok else opt[k].get("because"),
            }
        )
    cols = [
        Col("quantity", "quantity"),
        Col("value", "measured", "{:.4g}"),
        Col("ci_lo", "CI lo", "{:.4g}"),
        Col("ci_hi", "CI hi", "{:.4g}"),
        Col("note", "not identified because"),
    ]
    t = Table("fit_optimal", f"Compute-optimal allocation derived from the law ({co.get('constraint')})", cols, rows)
    if co.get("tie_break"):
        t.notes.append(f"tie-break: {co['tie_break']}")
    if (caveat := fit.verdicts.optima_caveat) is not None:
        t.notes.insert(0, caveat)
    return t
