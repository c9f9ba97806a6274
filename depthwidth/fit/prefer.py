"""Which law to show when the fitted law's claim is not identified.

``preferred(doc)`` reads a fit.json document: when its claim-carrying
parameter (e.g. D_crit) is not identified and ``--compare`` fitted a law of
another family (not resting on that parameter: the other D_crit form of
depth-delusion does) with a lower held-out error than the fitted law, the
best such law is the one to draw (solid), with the fitted law as the
alternative (dashed).  The held-out error is the leave-one-run-out RMSE (the
ranking ``dcrit_preference`` uses too); the extrapolation split's pick is
named beside it when the two disagree, and so is a same-family form that
ranks first.  Without LORO (fewer than 3 runs) the extrapolation error decides.

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
    """{law, alternative, by, line, fit} when another law should be drawn instead of the fitted one, else None.

    The candidate laws are those of another family than the fitted one (another D_crit form of
    depth-delusion rests on D_crit too); the one with the lowest held-out error is drawn when its
    error is below the fitted law's.  ``fit`` is a minimal fit document (law, options, params).
    """
    if not doc:
        return None
    claim = ((doc.get("identification") or {}).get("claim")) or {}
    cmp = doc.get("compare") or {}
    if claim.get("identified") is not False or not cmp.get("laws"):
        return None
    mine = fitted_label(doc)
    rows = {r["law"]: r for r in cmp["laws"] if r.get("params")}
    alt = rows.get(mine)
    if alt is None:
        return None
    family = mine.split("[", 1)[0]
    others = [r for r in rows.values() if r["law"].split("[", 1)[0] != family]
    pick = next(((k, col, name) for k, col, name in BY
                 if alt.get(col) is not None and any(r.get(col) is not None for r in others)), None)
    if pick is None:
        return None
    key, col, name = pick
    win = min((r for r in others if r.get(col) is not None), key=lambda r: r[col])
    if win[col] >= alt[col]:
        return None
    best = cmp.get("best") or {}
    notes = [f"the {n} split prefers {best[k]}" for k, _, n in BY if k != key and best.get(k) not in (None, win["law"])]
    first = best.get(key)
    if first not in (None, win["law"], mine) and first in rows and first.split("[", 1)[0] == family:
        notes.insert(0, f"{first} ranks first ({rows[first][col]:.3g}) but rests on {claim.get('parameter')} too")
    why = f"{name} RMSE {win[col]:.3g} vs {alt[col]:.3g} nats for {mine}" + "".join(f"; {x}" for x in notes)
    line = (f"{claim.get('parameter')} not identified: the held-out comparison prefers {win['law']} ({why}), "
            f"drawn solid; {mine} dashed as the alternative")
    law = law_of_label(win["law"], win.get("options"))
    return {"law": win["law"], "alternative": mine, "by": key, "line": line,
            "fit": {"law": law.name, "options": dict(law.options), "params": win["params"]}}
