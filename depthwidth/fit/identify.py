"""What a fit rests on: the data's extent and whether the claim-carrying parameter is identified.

Every fit states its number of runs and points and the range of each input
column, and answers one question in one line: is the parameter that carries
the law's claim pinned down by the data?

* depth-delusion: the claim is D_crit(W), where extra depth starts to hurt.
  It is identified when at least ``MIN_RUNS_PER_SIDE`` runs lie on each side
  of the fitted D_crit (shallower and deeper), its parameters are not on a
  bound, and the penalty is supported (BIC against the law without it,
  checks.py).  With every run deeper (or every run shallower) than D_crit,
  nothing in the data says where the penalty starts.
* chinchilla: the claim is the compute-optimal split, carried by alpha and
  beta; width-depth: the shape, carried by a_w and a_d.  Identified when
  neither is on a bound and (with intervals) neither interval contains 0.

Derived optima outside the physically meaningful range (fewer than one layer,
a width below the sweep's width quantum, or one unit without it) and D_crit
values below one layer are "not identified" rather than numbers:
``identification.optimum`` and ``identification.dcrit_range`` in fit.json hold
``{value, identified, because}`` per number.
"""

from __future__ import annotations

import math

import numpy as np

MIN_RUNS_PER_SIDE = 2
CLAIMS = {"chinchilla": ("alpha", "beta"), "width-depth": ("a_w", "a_d")}
CLAIM_COLUMNS = {"alpha": "params", "beta": "tokens", "a_w": "width", "a_d": "depth"}  # what each exponent scales


def ranges(table, law) -> dict[str, list[float]]:
    """[min, max] of loss and of every column the law reads (and flops when present)."""
    cols = ["loss", *law.columns] + (["flops"] if "flops" in table and "flops" not in law.columns else [])
    out = {}
    for c in cols:
        v = np.asarray(table[c], dtype=float)
        v = v[np.isfinite(v)]
        out[c] = [float(v.min()), float(v.max())] if len(v) else None
    return out


def _dcrit_claim(table, law, params, on_bound, support) -> dict:
    W = np.asarray(table["width"], dtype=float)
    D = np.asarray(table["depth"], dtype=float)
    runs = np.asarray(table["run"]).astype(str)
    ratio = D / law.dcrit(params, W)
    deeper, shallower = ratio > 1, ratio <= 1
    n_deep, n_shallow = len(set(runs[deeper])), len(set(runs[shallower]))
    bound = [p for p in ("kappa", "c", "p") if p in on_bound]
    out = {"parameter": "D_crit", "points_beyond": int(deeper.sum()), "points_within": int(shallower.sum()),
           "runs_beyond": n_deep, "runs_within": n_shallow,
           "depth_over_dcrit": [float(ratio.min()), float(ratio.max())]}
    if n_deep < MIN_RUNS_PER_SIDE:
        why = (f"only {n_deep} run(s) are deeper than the fitted D_crit (deepest depth/D_crit = {ratio.max():.2g}): "
               "nothing shows where extra depth starts to hurt")
    elif n_shallow < MIN_RUNS_PER_SIDE:
        why = (f"only {n_shallow} run(s) are at or below the fitted D_crit (shallowest depth/D_crit = {ratio.min():.2g}): "
               "nothing pins where the penalty starts")
    elif bound:
        why = f"{', '.join(bound)} sit(s) on a bound of the fit"
    elif support is not None and not support["supported"]:
        why = f"the penalty is not supported by the data (BIC {support['delta_bic']:+.1f} against the law without it)"
    else:
        why = (f"{n_shallow} runs lie at or below and {n_deep} runs beyond the fitted D_crit"
               + (f", and the penalty lowers BIC by {-support['delta_bic']:.1f}" if support is not None else ""))
        out["identified"] = True
    out.setdefault("identified", False)
    out["because"] = why
    return out


def _exponent_claim(law, params, on_bound, ci, table=None) -> dict:
    names = CLAIMS[law.name]
    bad = []
    for k in names:  # a column the sweep never varies: its power is the constant E, whatever the interval says
        col = CLAIM_COLUMNS.get(k)
        if table is not None and col in table:
            v = np.asarray(table[col], dtype=float)
            v = v[np.isfinite(v)]
            if len(v) and v.max() <= v.min() * 1.01:
                bad.append(f"every point has the same {col} ({v.min():.3g}): {k} cannot be told from the constant")
    bad += [f"{k} is on a bound" for k in names if k in on_bound]
    for k in names:
        c = (ci or {}).get(k)
        if c is not None and c[0] <= 0 <= c[1]:
            bad.append(f"the interval of {k} [{c[0]:.3g}, {c[1]:.3g}] contains 0")
    if bad:
        why = "; ".join(bad)
    else:
        why = ", ".join(f"{k} = {params[k]:.3g}" for k in names) + (
            " with intervals clear of 0" if ci and all(ci.get(k) for k in names) else " (no intervals: --bootstrap 0)")
    return {"parameter": " and ".join(names), "identified": not bad, "because": why}


def _range_flag(k, v, floor, unit) -> dict:
    if not (isinstance(v, (int, float)) and math.isfinite(v)) or v < floor:
        return {"value": None, "identified": False,
                "because": f"the law's {k} = {v:.3g} is below {unit}" if isinstance(v, (int, float))
                else f"the law has no finite {k}"}
    return {"value": float(v), "identified": True}


def below_floor(key: str, value, quantum: int | None = None) -> bool:
    """A flat derived number (``compute_optimal.D_opt``, ``dcrit[W=64]``, ``W_opt`` …) outside the meaningful range."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    base = key.rsplit(".", 1)[-1]
    if base == "D_opt" or base.startswith("dcrit["):
        return value < 1.0
    return base == "W_opt" and value < (quantum or 1)


def meaningful_optimum(derived: dict, quantum: int | None = None) -> dict:
    """D_opt and W_opt of the compute-optimal allocation: a number only when physically meaningful.

    ``quantum``: the width quantum of the sweep (model.quantum); widths below it cannot be built.
    """
    co = derived.get("compute_optimal") or {}
    w_unit = f"the width quantum ({quantum})" if quantum and quantum > 1 else "one unit of width"
    out = {}
    for k, floor, unit in (("D_opt", 1.0, "one layer"), ("W_opt", float(quantum or 1), w_unit)):
        v = co.get(k)
        if v is None:
            continue
        out[k] = _range_flag(f"optimum {k}", v, floor, unit)
    return out


def meaningful_dcrit(derived: dict) -> dict:
    """D_crit at the sweep's widths and the reference models: a number only when it is at least one layer.

    Keys as in the derived numbers: ``dcrit[W=64]``, ``dcrit[GPT-3]`` (the depth/D_crit ratio of a
    reference model is not identified with it).
    """
    dc = derived.get("dcrit") or {}
    out = {f"dcrit[W={w}]": _range_flag(f"D_crit(W={w})", v.get("value"), 1.0, "one layer")
           for w, v in (dc.get("widths") or {}).items() if v.get("value") is not None}
    out.update({f"dcrit[{m}]": _range_flag(f"D_crit({m})", v.get("dcrit"), 1.0, "one layer")
                for m, v in (dc.get("reference") or {}).items() if v.get("dcrit") is not None})
    return out


def not_identified_line(ident: dict) -> str | None:
    """One line naming the D_crit values below one layer, or None."""
    bad = [k[len("dcrit["):-1] for k, v in (ident.get("dcrit_range") or {}).items() if not v["identified"]]
    if not bad:
        return None
    return f"D_crit below one layer at {', '.join(bad)}: not identified (shown as such, not as numbers)"


def identification(table, law, params: dict, *, on_bound=(), ci: dict | None = None,
                   derived: dict | None = None, support: dict | None = None, quantum: int | None = None) -> dict:
    """What the fit rests on and whether its claim is identified, with the one-line verdict."""
    runs = np.asarray(table["run"]).astype(str)
    out = {"points": int(len(runs)), "runs": int(len(set(runs))), "ranges": ranges(table, law), "quantum": quantum}
    if "dcrit" in law.options:
        claim = _dcrit_claim(table, law, params, set(on_bound), support)
    elif law.name in CLAIMS:
        claim = _exponent_claim(law, params, set(on_bound), ci, table)
    else:  # pragma: no cover - every law names its claim
        claim = {"parameter": None, "identified": None, "because": "no claim-carrying parameter declared"}
    out["claim"] = claim
    out["optimum"] = meaningful_optimum(derived or {}, quantum)
    out["dcrit_range"] = meaningful_dcrit(derived or {})
    out["verdict"] = f"{claim['parameter']} identified: {'yes' if claim['identified'] else 'no'}, because {claim['because']}"
    return out


def rests_on(ident: dict) -> str:
    """One line: runs, points and the ranges of the input columns."""
    def r(c, v):
        return f"{c} {v[0]:.3g}–{v[1]:.3g}" if v else f"{c} —"

    return (f"rests on {ident['runs']} runs, {ident['points']} points; "
            + ", ".join(r(c, v) for c, v in ident["ranges"].items()))
