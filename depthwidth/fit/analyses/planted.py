"""A store ``dw simulate`` wrote: the fit against the world it was planted from (world.json).
Asked for by the data, not by a flag: every run of the fitted table is simulated and the store
keeps its world.

When the store's ``world.json`` names the law that was fitted (same law, D_crit form and E), every
parameter and derived number is set beside its planted value: is the planted value inside the
fit's interval?  Derived numbers are recomputed from the planted parameters with the fit's own
widths, ``c_ref`` and parameter count, so they are the same quantities.  A store planted with
another law, or with N in another convention, is compared on the derived numbers only (its
parameters mean something else), and says so.  The line said of it is fit.json's
``verdicts.planted`` (``summary_line``).
"""

from __future__ import annotations

from depthwidth.core.tables import Col, Table

import json
import math
from pathlib import Path

SECTION = "planted"
OPTIONS = ()


def section(ctx) -> dict | None:
    world = read_world(ctx.sweep_dir)
    if world is None:
        return None
    iv = ctx.iv
    return compare(
        world,
        ctx.chk.law,
        ctx.fr.params,
        iv.ci,
        ctx.point,
        iv.dci,
        ctx.widths,
        ctx.opts.c_ref,
        ctx.count,
        ctx.n_conv,
        iv.withheld,
    )


WORLD_FILE = "world.json"  # written by simulate/store.py


def read_world(sweep_dir) -> dict | None:
    if sweep_dir is None:
        return None
    try:
        doc = json.loads((Path(sweep_dir) / WORLD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("world"), dict) else None


def _entry(truth, est, ci) -> dict:
    ok = truth is not None and math.isfinite(truth)
    covered = None if not (ok and ci) else bool(ci[0] <= truth <= ci[1])
    return {"planted": truth if ok else None, "estimate": est, "ci": ci, "covered": covered}


def compare(
    doc: dict,
    law,
    params: dict,
    ci: dict,
    point: dict,
    dci: dict,
    widths,
    c_ref,
    count,
    convention: str,
    withheld: dict | None = None,
) -> dict:
    """{world, same_law, numbers: {key: {planted, estimate, ci, covered}}, covered, total, note}."""
    from depthwidth.fit.derived import derived_numbers
    from depthwidth.fit.laws import get_law

    w = doc["world"]
    o = w.get("options") or {}
    planted_law = get_law(w["law"], dcrit=o.get("dcrit", "log"), irreducible=bool(o.get("irreducible")))
    same = planted_law.name == law.name and dict(planted_law.options) == dict(law.options)
    same_n = w.get("n_convention") == convention
    numbers = {}
    if same and same_n:
        for k, v in params.items():
            numbers[k] = _entry(w["params"].get(k), v, ci.get(k))
    truth = {k: float(v[0]) for k, v in derived_numbers(planted_law, w["params"], widths, c_ref, count).items()}
    for k, est in point.items():
        if k in truth:
            numbers[k] = _entry(truth[k], est, dci.get(k))
    for k in withheld or {}:
        if k in numbers:
            numbers[k]["withheld"] = True
    judged = [v["covered"] for v in numbers.values() if v["covered"] is not None]
    note = None
    if not same:
        note = f"planted with {w.get('label', w['law'])}, fitted {law.name}: only derived numbers compared"
    elif not same_n:
        note = (
            f"planted with N = {w.get('n_convention')}, fitted with N = {convention}: the parameters mean "
            "different things; only derived numbers compared"
        )
    return {
        "world": {k: w.get(k) for k in ("label", "params", "n_convention", "noise")},
        "seed": doc.get("seed"),
        "same_law": same and same_n,
        "numbers": numbers,
        "covered": sum(judged),
        "total": len(judged),
        "withheld": sum(1 for v in numbers.values() if v.get("withheld")),
        "note": note,
    }


def summary_line(p: dict) -> str:
    head = f"planted world ({p['world'].get('label')}, seed {p.get('seed')}): "
    if not p["total"]:
        why = (
            f"all {p['withheld']} intervals withheld (see the fit's warnings)"
            if p.get("withheld")
            else "no interval to compare (--bootstrap 0)"
        )
        return head + why + (f"; {p['note']}" if p.get("note") else "")
    missed = [k for k, v in p["numbers"].items() if v["covered"] is False]
    return (
        head
        + f"{p['covered']} of {p['total']} intervals contain the planted value"
        + (f" ({p['withheld']} withheld)" if p.get("withheld") else "")
        + (f"; missed: {', '.join(missed[:8])}" + (" …" if len(missed) > 8 else "") if missed else "")
        + (f"; {p['note']}" if p.get("note") else "")
    )


def tables(fit) -> dict:
    """A simulated store's fit: each number beside the planted world's value, inside its interval or not."""
    p = fit.sections["planted"]
    rows = [
        {
            "number": k,
            "planted": v["planted"],
            "estimate": v["estimate"],
            "ci_lo": (v.get("ci") or [None, None])[0],
            "ci_hi": (v.get("ci") or [None, None])[1],
            "inside": {True: "yes", False: "NO", None: None}[v["covered"]],
        }
        for k, v in p["numbers"].items()
    ]
    cols = [
        Col("number", "number"),
        Col("planted", "planted", "{:.4g}"),
        Col("estimate", "fitted", "{:.4g}"),
        Col("ci_lo", "CI lo", "{:.4g}"),
        Col("ci_hi", "CI hi", "{:.4g}"),
        Col("inside", "inside"),
    ]
    t = Table(
        "fit_planted", f"Planted truth ({p['world'].get('label')}, dw simulate): is it inside the interval?", cols, rows
    )
    t.notes.append(fit.verdicts.planted)  # the line dw fit decided (fit/result.py ``Rules.planted``)
    return {"fit_planted": t}
