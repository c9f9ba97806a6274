"""Which law to show when the fitted law's claim is not identified.

``preferred(doc)`` reads a fit.json document: when its claim-carrying
parameter (e.g. D_crit) is not identified and ``--compare`` ranked another
law lower on held-out error, that law is the one to draw (solid), with the
fitted law as the alternative (dashed).  The held-out error is the
leave-one-run-out RMSE (the ranking ``dcrit_preference`` uses too); the
extrapolation split's pick is named beside it when the two disagree.  Without
LORO (fewer than 3 runs) the extrapolation ranking decides.

The compare rows of fit.json carry each law's fitted ``params`` (and, since
this module, its ``options``); older documents name the options only in the
label, e.g. ``depth-delusion[power+E]``, which :func:`law_of_label` parses.
"""

from __future__ import annotations

from depthwidth.fit.compare import label
from depthwidth.fit.laws import Law, get_law

BY = (("loro", "loro_rmse", "leave-one-run-out"), ("extrapolation", "extrapolation_rmse", "extrap."))


def law_of_label(lab: str, options: dict | None = None) -> Law:
    """The law a compare row names: ``chinchilla``, ``width-depth``, ``depth-delusion[log+E]`` …"""
    if options:
        return get_law(lab.split("[", 1)[0], dcrit=options.get("dcrit", "log"),
                       irreducible=bool(options.get("irreducible", False)))
    name, _, rest = lab.partition("[")
    form = rest.rstrip("]")
    return get_law(name, dcrit=form.split("+")[0] or "log", irreducible=form.endswith("+E"))


def fitted_label(doc: dict) -> str:
    o = doc.get("options") or {}
    return label(law_of_label(doc["law"], {"dcrit": o.get("dcrit", "log"), "irreducible": o.get("irreducible", False)}))


def preferred(doc: dict | None) -> dict | None:
    """{law, fit, by, line, ...} when another law should be drawn instead of the fitted one, else None.

    ``fit`` is a minimal fit document (law, options, params) of the preferred law.
    """
    if not doc:
        return None
    claim = ((doc.get("identification") or {}).get("claim")) or {}
    cmp = doc.get("compare") or {}
    if claim.get("identified") is not False or not cmp.get("laws"):
        return None
    rows = {r["law"]: r for r in cmp["laws"] if r.get("params")}
    mine = fitted_label(doc)
    best = cmp.get("best") or {}
    pick = next(((k, col, name) for k, col, name in BY if best.get(k) in rows), None)
    if pick is None or best[pick[0]] == mine or mine not in rows:
        return None
    key, col, name = pick
    win, alt = rows[best[key]], rows[mine]
    law = law_of_label(win["law"], win.get("options"))
    other = [f"the {n} split prefers {best[k]}" for k, _, n in BY if k != key and best.get(k) not in (None, win["law"])]
    why = (f"{name} RMSE {win[col]:.3g} vs {alt[col]:.3g} nats for {mine}" + (f"; {other[0]}" if other else "")
           if alt.get(col) is not None else f"{name} RMSE {win[col]:.3g} nats")
    line = (f"{claim.get('parameter')} not identified: the held-out comparison prefers {win['law']} ({why}), "
            f"drawn solid; {mine} dashed as the alternative")
    return {"law": win["law"], "alternative": mine, "by": key, "line": line,
            "fit": {"law": law.name, "options": dict(law.options), "params": win["params"]}}
