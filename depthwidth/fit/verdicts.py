"""Every verdict on a fit: what it rests on, whether its claim is identified, which law to draw,
which derived numbers mean something.

Every fit states its number of runs and points and the range of each input
column, and answers one question in one line: is the parameter that carries
the law's claim pinned down by the data?

* depth-delusion: the claim is D_crit(W), where extra depth starts to hurt.
  Its verdict is the identification ladder (``dcrit_ladder`` below): ``no-penalty``,
  ``not-located`` or ``located``, resting on D_crit's own interval at the
  grid's widths, not on a model-selection test.
* chinchilla: the claim is the compute-optimal split, carried by alpha and
  beta; width-depth: the shape, carried by a_w and a_d.  Identified when
  neither is on a bound and each has an interval that holds neither 0 nor a
  bound of the fit (an interval cut by a bound pinned nothing: a planted
  world with alpha = 0 was "identified" in 18-24% of tables by [0.06, 5]).

Derived optima outside the physically meaningful range (fewer than one layer,
a width below the sweep's width quantum, or one unit without it) and D_crit
values below one layer are "not identified" rather than numbers:
``identification.optimum`` and ``identification.dcrit_range`` in fit.json hold
``{value, identified, because}`` per number.

Which law to draw (``preferred``): when the claim is not identified and
``--compare`` fitted a law of another family (not resting on that parameter:
the other D_crit form of depth-delusion does) that predicts the held-out runs
better than the fitted law -- the lowest leave-one-run-out RMSE, *and* lower
by a paired test over runs (``loro_better``; the test ``dcrit_preference``
uses too) -- that law is drawn (solid), the fitted law dashed as the
alternative.  The extrapolation split's lowest error is named beside it when
it is another law's, and so is a same-family form that ranks first.  A
fit.json written before the per-run errors (``loro_runs``) prefers no law.  The
compare rows of fit.json carry each law's fitted ``params`` and ``options``;
older documents name the options only in the label, e.g.
``depth-delusion[power+E]``, which fit/userlaw.py's ``law_of_label`` parses.

Every verdict is decided here (the D_crit ladder too: ``dcrit_ladder``), at fit time
(``identification``, ``dcrit_warnings``, ``quality_warnings``) or from a fit.json (``flags``, ``preferred``, ``drawn``,
``truth_line``, ``identification_notes``, ``optima_caveat``: what fit/result.py stores as
fit.json's ``verdicts`` when ``dw fit`` makes the fit, and decides when an older one is read):
``dw fit``, the report and the README's demo section only show them.
"""

from __future__ import annotations

from depthwidth.fit.defaults import default

import math

import numpy as np

from depthwidth.fit.laws import builtin_of_label, has_hinge, label
from depthwidth.fit.userlaw import law_of_label

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


# -- The D_crit identification ladder -------------------------------------------------------------------
# Is D_crit located?  The identification ladder of a law with a depth penalty, decided once, at
# fit time, and stored in fit.json (``identification.verdict``, ``identification.widths``).
#
# A structural penalty can lower BIC while its change point is unpinned: "a penalty helps" is not
# "D_crit is here".  So the verdict is a ladder, and each rung rests on what it claims:
#
# ``no-penalty``
#     The law without the penalty is as good: the penalty does not lower BIC by more than 2
#     (fit/engine.py ``penalty_support``, the runs as its sample size), or fewer than
#     ``MIN_BEYOND`` runs lie beyond the fitted D_crit (a penalty through one run fits its noise).  Nothing is
#     said about where D_crit is — only that no run of the grid shows it (it may lie beyond the
#     deepest run, or there may be none).
# ``not-located``
#     A penalty helps, but D_crit's interval is not pinned at any width of the grid (the reason
#     names the interval), or the sign of its width dependence is not settled.
# ``located``
#     At one width W of the grid at least, D_crit(W)'s interval [lo, hi] is bounded, lies inside
#     the depths the grid ran at that width (lo ≥ the shallowest, hi ≤ the deepest), and is
#     narrow: hi/lo ≤ ``MAX_RATIO``; and, where the grid has more than one width, the sign of the
#     width dependence is settled by its own interval (power form: p's interval excludes 0; the
#     log form, κ·ln W with κ > 0, rises by construction, and the line says the form assumes it).
#
# The intervals are one simultaneous band over the grid's widths (``band``: the bootstrap's sup-t
# band of log D_crit(W), at the fit's level), not one interval per width: the verdict claims every
# located width at once, and with per-width 95% intervals "one of four widths misses" happens more
# often than 5% (measured: 11% of located power-form fits).
#
# Per width, ``widths[W]`` holds {verdict, value, interval, depths, because}; a width is
# ``located`` under the same rule, less the sign.  Every reader (``dw fit``, the report, the
# figures, ``dw suggest``, ``dw status``) prints this record; none decides again.
#
# The rule's error rates are measured on planted worlds (benchmarks/bench_verdicts.py;
# docs/verdicts.md): D_crit inside the grid, below its shallowest depth, beyond its deepest, no
# penalty at all, shapes pooled under a shape-blind law, both D_crit forms, two noise levels.

LADDER = ("no-penalty", "not-located", "located")
HEADS = {  # how each rung's line begins (the demo and the tests find the verdict by it)
    "no-penalty": "no depth penalty shown",
    "not-located": "D_crit not located",
    "located": "D_crit located",
}
MIN_BEYOND = 2  # runs beyond the fitted D_crit (a penalty through one run fits its noise)
MAX_RATIO = 2.0  # hi/lo of D_crit(W)'s interval at most this to call it located (within a factor of 2)


def _fmt_iv(iv) -> str:
    return f"[{iv[0]:.3g}, {iv[1]:.3g}]"


def _width_rung(value, iv, depths: tuple[float, float], supported: bool, level: float, what: str = "interval") -> dict:
    """One width's rung: {verdict, value, interval, depths, because}; ``what``: the interval's name in
    ``because`` ("simultaneous band": ``band``'s, not the D_crit table's per-width interval)."""
    lo_d, hi_d = depths
    out = {
        "value": None if value is None or not math.isfinite(value) else float(value),
        "interval": None if iv is None else [float(iv[0]), float(iv[1])],
        "depths": [float(lo_d), float(hi_d)],
    }
    pct = f"{100 * level:.0f}%"
    if not supported:
        out.update(verdict="no-penalty", because="the law without the penalty is as good")
    elif iv is None or not all(math.isfinite(x) for x in iv):
        out.update(verdict="not-located", because="no interval (--bootstrap 0, or it was withheld)")
    elif iv[0] <= 0 or iv[1] / iv[0] > MAX_RATIO:
        ratio = "unbounded" if iv[0] <= 0 else f"{iv[1] / iv[0]:.2g}×"
        out.update(
            verdict="not-located",
            because=f"its {pct} {what} {_fmt_iv(iv)} spans {ratio} (located: at most {MAX_RATIO:g}×)",
        )
    elif iv[0] < lo_d or iv[1] > hi_d:
        out.update(
            verdict="not-located",
            because=f"its {pct} {what} {_fmt_iv(iv)} reaches outside the grid's depths at this width "
            f"({lo_d:g}–{hi_d:g})",
        )
    else:
        out.update(verdict="located", because=f"{pct} band {_fmt_iv(iv)} inside depths {lo_d:g}–{hi_d:g}")
    return out


def band(law, params: dict, samples: dict | None, widths, level: float) -> dict | None:
    """{str(W): [lo, hi]}: the simultaneous ``level`` band of D_crit over ``widths`` from the
    bootstrap's parameter replicates (``samples``: {name: (B,) array}), the sup-t band of log D_crit
    around the fit's own; None without replicates."""
    if not samples or not len(next(iter(samples.values()))):
        return None
    ws = [float(w) for w in widths]
    centre = np.log(np.asarray(law.dcrit(params, ws), dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        rep = np.log(np.asarray(law.dcrit(samples, ws), dtype=float))  # (B, len(ws))
    rep = rep[np.isfinite(rep).all(axis=1)]
    if len(rep) < 20 or not np.isfinite(centre).all():
        return None
    sd = rep.std(axis=0)
    sd = np.where(sd > 0, sd, 1e-12)
    q = float(np.quantile(np.max(np.abs(rep - centre) / sd, axis=1), level))
    return {str(int(w)): [float(np.exp(c - q * s)), float(np.exp(c + q * s))] for w, c, s in zip(ws, centre, sd)}


def _sign(law, ci: dict | None, n_widths: int, level: float) -> dict:
    """Whether the sign of D_crit's width dependence is settled: {settled, direction, because}."""
    if n_widths < 2:
        return {"settled": True, "direction": None, "because": "one width: no width dependence is claimed"}
    if law.options.get("dcrit") == "log":
        return {
            "settled": True,
            "direction": "rises",
            "because": "the log form (κ·ln W, κ > 0) rises with width by construction: assumed, not measured",
        }
    c = (ci or {}).get("p")
    if c is None:
        return {"settled": False, "direction": None, "because": "p has no interval"}
    if c[0] > 0 or c[1] < 0:
        d = "rises" if c[0] > 0 else "falls"
        return {"settled": True, "direction": d, "because": f"p's {100 * level:.0f}% interval {_fmt_iv(c)} excludes 0"}
    return {
        "settled": False,
        "direction": None,
        "because": f"p's {100 * level:.0f}% interval {_fmt_iv(c)} contains 0: whether D_crit rises or falls "
        "with width is not settled",
    }


def dcrit_ladder(
    table,
    law,
    params: dict,
    *,
    support: dict | None,
    ci: dict | None,
    dci: dict | None,
    level: float = default("level"),
    pooled: str | None = None,
    samples: dict | None = None,
) -> dict:
    """The ladder's record for a depth-delusion fit: {verdict, because, line, widths, sign, max_ratio}.

    ``support``: the penalty's BIC support (``penalty_support``); ``ci``/``dci``: the intervals of the
    parameters and of the derived numbers (``dcrit[W=..]``) as fit.json shows them (None where
    withheld); ``samples``: the bootstrap's parameter replicates, for the simultaneous band the
    rungs rest on (without them, the per-width intervals); ``pooled``: why the runs pool what the
    law cannot tell apart (then no rung above ``not-located`` is claimed)."""
    W = np.asarray(table["width"], dtype=float)
    D = np.asarray(table["depth"], dtype=float)
    dc_fit = law.dcrit(params, W)
    beyond = (
        int(len(set(np.asarray(table["run"]).astype(str)[D > dc_fit]))) if "run" in table else int((D > dc_fit).sum())
    )
    supported = bool(support and support.get("supported")) and beyond >= MIN_BEYOND
    widths = sorted({int(w) for w in W})
    sim = band(law, params, samples, widths, level)
    rungs = {}
    for w in widths:
        at = D[W == w]
        value = float(law.dcrit(params, [w])[0])
        iv = (dci or {}).get(f"dcrit[W={w}]")  # None: withheld (fit/boot.py), or no bootstrap
        what = "interval"
        if iv is not None and sim is not None:
            iv, what = sim[str(w)], "simultaneous band"
        rungs[str(w)] = _width_rung(value, iv, (at.min(), at.max()), supported, level, what)
    sign = _sign(law, ci, len(widths), level)
    located = [w for w, r in rungs.items() if r["verdict"] == "located"]
    if not supported:
        verdict = "no-penalty"
        if beyond < MIN_BEYOND:
            because = (
                "no run lies beyond the fitted D_crit: the penalty touches no run"
                if beyond == 0
                else "one run lies beyond the fitted D_crit: a penalty through one run fits its noise"
            )
        else:
            because = (
                f"the penalty does not lower BIC by more than 2 ({support['delta_bic']:+.1f} against the law "
                "without it)"
                if support
                else "the penalty's support could not be measured (gamma pinned)"
            )
        because += "; no run of the grid shows where extra depth starts to hurt"
    elif pooled:
        verdict, because = "not-located", f"no location is claimed: {pooled}"
    elif not located:
        verdict = "not-located"
        r = rungs[str(widths[len(widths) // 2])]
        bic = f"the penalty lowers BIC by {-support['delta_bic']:.1f}, but " if support else ""
        because = f"{bic}D_crit is pinned at no width of the grid (e.g. W={widths[len(widths) // 2]}: {r['because']})"
    elif not sign["settled"]:
        verdict, because = "not-located", sign["because"]
    else:
        verdict = "located"
        at = "; ".join(f"W={w}: {rungs[w]['value']:.3g} {_fmt_iv(rungs[w]['interval'])}" for w in located)
        because = f"D_crit(W) pinned at {len(located)} of {len(widths)} widths ({at})" + (
            f"; it {sign['direction']} with width ({sign['because']})" if sign["direction"] else ""
        )
    return {
        "verdict": verdict,
        "because": because,
        "line": f"{HEADS[verdict]}: {because}",
        "widths": rungs,
        "sign": sign,
        "runs_beyond": beyond,
        "max_ratio": MAX_RATIO,
        "level": level,
        "band": "simultaneous over the grid's widths (bootstrap sup-t)" if sim else "per width",
    }


def _dcrit_claim(table, law, params, support, ci, dci, level, pooled, samples=None) -> dict:
    """The D_crit claim: the identification ladder (``dcrit_ladder``), with the points on each side."""
    W = np.asarray(table["width"], dtype=float)
    D = np.asarray(table["depth"], dtype=float)
    runs = np.asarray(table["run"]).astype(str)
    ratio = D / law.dcrit(params, W)
    deeper = ratio > 1
    lad = dcrit_ladder(table, law, params, support=support, ci=ci, dci=dci, level=level, pooled=pooled, samples=samples)
    return {
        "parameter": "D_crit",
        "identified": lad["verdict"] == "located",
        "because": lad["because"],
        "ladder": lad,
        "points_beyond": int(deeper.sum()),
        "points_within": int((~deeper).sum()),
        "runs_beyond": len(set(runs[deeper])),
        "runs_within": len(set(runs[~deeper])),
        "depth_over_dcrit": [float(ratio.min()), float(ratio.max())],
    }


def penalty_supported(delta_bic: float) -> bool:
    """The depth penalty is supported when it lowers BIC by more than 2 (fit/engine.py ``penalty_support``)."""
    return bool(delta_bic < -2.0)


def dcrit_warnings(past: int, support: dict | None) -> list[str]:
    """At fit time, before the claim's verdict: ``past`` points beyond the fitted D_crit and the
    penalty's BIC support (fit/engine.py ``penalty_support``) -- what they leave unidentified."""
    if past == 0:
        return ["no point lies beyond the fitted D_crit: the penalty (gamma, mu) and D_crit are not identified"]
    out = [f"only {past} point(s) lie beyond the fitted D_crit: the penalty is weakly identified"] if past < 3 else []
    if support is not None and not support["supported"]:
        out.append(
            f"the depth penalty is not supported by the data (BIC {support['delta_bic']:+.1f} against the "
            "same law without it): gamma, mu and D_crit are not identified"
        )
    return out


# -- Quality warnings at fit time (fit_law adds them to its warnings) ----------------------------------
# Plain-language checks on a fit the data may barely constrain.  ``quality_warnings`` lists what a
# reader must know before trusting a fit: too few points for the free parameters (fewer runs than free
# parameters: fit/boot.py, said before the numbers), parameters sitting on a bound, starts that did
# not converge, and for the depth-delusion law the evidence on its penalty (``penalty_support``: BIC
# against the same law with the penalty switched off, a refit: fit/engine.py) with what it says
# (``dcrit_warnings`` above).


def quality_warnings(fr, table, support: dict | None = None) -> list[str]:
    """Plain-language warnings about a fit the data barely constrain (``fr``: fit/engine.py's
    ``FitResult``; ``support``: the penalty's BIC support, fit/engine.py ``penalty_support``, which
    ``fit_law`` computes and stores in ``fr.checks`` first)."""
    law, out = fr.law, []
    k = len(law.params) - len(fr.pins)
    if fr.n < 3 * k:
        out.append(f"only {fr.n} points for {k} free parameters: the fit is barely constrained")
    for name in fr.on_bound:
        p = law.param(name)
        out.append(
            f"{name} sits on a bound of its range ({_fmt(p.to_natural(p.lo))} .. {_fmt(p.to_natural(p.hi))}): the "
            "data do not pin it down"
        )
    if fr.starts["converged"] < 0.5 * fr.starts["total"]:
        out.append(f"only {fr.starts['converged']} of {fr.starts['total']} starts converged")
    if has_hinge(law):
        vals = fr.params
        dc = law.dcrit(vals, np.asarray(table["width"], dtype=float))
        past = int((np.asarray(table["depth"], dtype=float) > dc).sum())
        out += dcrit_warnings(past, support)
    if not fr.r2 > 0:
        out.append(f"R² = {fr.r2:.3g}: the law explains less than a constant would")
    return out


def _fmt(x: float) -> str:
    return f"{x:.4g}"


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
    for k in names:  # a claim rests on its interval: none, one holding 0, or one cut by a bound pins nothing
        c = (ci or {}).get(k)
        p = law.param(k)
        if c is None:
            bad.append(f"{k} has no interval (--bootstrap 0, or it was withheld)")
        elif c[0] <= 0 <= c[1]:
            bad.append(f"the interval of {k} [{c[0]:.3g}, {c[1]:.3g}] contains 0")
        elif not p.log and (c[0] <= p.lo + 1e-6 * (p.hi - p.lo) or c[1] >= p.hi - 1e-6 * (p.hi - p.lo)):
            edge = p.lo if c[0] <= p.lo + 1e-6 * (p.hi - p.lo) else p.hi
            bad.append(f"the interval of {k} [{c[0]:.3g}, {c[1]:.3g}] runs to the bound {edge:g} of the fit")
    if bad:
        why = "; ".join(dict.fromkeys(bad))
    else:
        why = ", ".join(f"{k} = {params[k]:.3g}" for k in names) + " with intervals clear of 0 and of the bounds"
    return {"parameter": " and ".join(names), "identified": not bad, "because": why}


def _range_flag(k, v, floor, unit) -> dict:
    if not (isinstance(v, (int, float)) and math.isfinite(v)) or v < floor:
        return {
            "value": None,
            "identified": False,
            "because": f"the law's {k} = {v:.3g} is below {unit}"
            if isinstance(v, (int, float))
            else f"the law has no finite {k}",
        }
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


def bound_by_claim(optimum: dict, claim: dict | None) -> dict:
    """The optimum flags with the claim's verdict: every optimum is derived from the law's
    claim-carrying parameters, so where the fit does not identify them no optimum is identified
    either (the demo's W_opt = 1.4e5 from a grid of widths 32-96 had said identified)."""
    if not claim or claim.get("identified") is not False:
        return optimum
    why = _claim_why(claim)
    return {
        k: v if not v.get("identified") else {"value": None, "identified": False, "because": why}
        for k, v in optimum.items()
    }


def _claim_why(claim: dict) -> str:
    return f"derived from {claim.get('parameter')}, which the fit does not identify"


def meaningful_dcrit(derived: dict) -> dict:
    """D_crit at the sweep's widths and the reference models: a number only when it is at least one layer.

    Keys as in the derived numbers: ``dcrit[W=64]``, ``dcrit[GPT-3]`` (the depth/D_crit ratio of a
    reference model is not identified with it).
    """
    dc = derived.get("dcrit") or {}
    out = {
        f"dcrit[W={w}]": _range_flag(f"D_crit(W={w})", v.get("value"), 1.0, "one layer")
        for w, v in (dc.get("widths") or {}).items()
        if v.get("value") is not None
    }
    out.update(
        {
            f"dcrit[{m}]": _range_flag(f"D_crit({m})", v.get("dcrit"), 1.0, "one layer")
            for m, v in (dc.get("reference") or {}).items()
            if v.get("dcrit") is not None
        }
    )
    return out


def not_identified_line(ident: dict) -> str | None:
    """One line naming the D_crit values below one layer, or None."""
    bad = [k[len("dcrit[") : -1] for k, v in (ident.get("dcrit_range") or {}).items() if not v["identified"]]
    if not bad:
        return None
    return f"D_crit below one layer at {', '.join(bad)}: not identified (shown as such, not as numbers)"


def identification(
    table,
    law,
    params: dict,
    *,
    on_bound=(),
    ci: dict | None = None,
    dci: dict | None = None,
    derived: dict | None = None,
    support: dict | None = None,
    quantum: int | None = None,
    level: float = default("level"),
    pooled: str | None = None,
    n_name: str = "params",
    samples: dict | None = None,
) -> dict:
    """What the fit rests on and whether its claim is identified: ``verdict`` (the ladder's rung for a
    law with D_crit, ``dcrit_ladder``; ``identified`` | ``not-identified`` for an exponent claim; None for a
    user law) and ``line``, the sentence every reader prints.  ``n_name``: what the ``params`` column
    holds (the N convention the fit used), named so in ``ranges``."""
    runs = np.asarray(table["run"]).astype(str)
    rg = ranges(table, law)
    if n_name != "params" and "params" in rg:
        rg = {(n_name if k == "params" else k): v for k, v in rg.items()}
    out = {"points": int(len(runs)), "runs": int(len(set(runs))), "ranges": rg, "quantum": quantum}
    if "dcrit" in law.options:
        claim = _dcrit_claim(table, law, params, support, ci, dci, level, pooled, samples)
    elif law.name in CLAIMS:
        claim = _exponent_claim(law, params, set(on_bound), ci, table)
    else:  # a user-defined law (fit/userlaw.py) declares no claim: nothing to identify, nothing to flag
        claim = {"parameter": None, "identified": None, "because": f"{law.name} is a user-defined law"}
    out["claim"] = claim
    out["optimum"] = bound_by_claim(meaningful_optimum(derived or {}, quantum), claim)
    out["dcrit_range"] = meaningful_dcrit(derived or {})
    if "ladder" in claim:
        lad = claim.pop("ladder")
        out.update(verdict=lad["verdict"], line=lad["line"], widths=lad["widths"], sign=lad["sign"])
        out["max_ratio"], out["level"], out["band"] = lad["max_ratio"], lad["level"], lad["band"]
    elif claim["identified"] is None:
        out.update(verdict=None, line=f"no claim-carrying parameter: {claim['because']}")
    else:
        out["verdict"] = "identified" if claim["identified"] else "not-identified"
        out["line"] = (
            f"{claim['parameter']} identified: {'yes' if claim['identified'] else 'no'}, because {claim['because']}"
        )
    return out


def verdict_line(ident: dict | None) -> str | None:
    """The sentence of an identification record (fit.json before the ladder kept it in ``verdict``)."""
    if not ident:
        return None
    if ident.get("line"):
        return ident["line"]
    v = ident.get("verdict")
    return v if isinstance(v, str) and v not in LADDER else None


def rests_on(ident: dict) -> str:
    """One line: runs, points and the ranges of the input columns."""

    def r(c, v):
        return f"{c} {v[0]:.3g}–{v[1]:.3g}" if v else f"{c} —"

    return f"rests on {ident['runs']} runs, {ident['points']} points; " + ", ".join(
        r(c, v) for c, v in ident["ranges"].items()
    )


# -- which law to draw ----------------------------------------------------------

BY = (("loro", "loro_rmse", "leave-one-run-out"), ("extrapolation", "extrapolation_rmse", "extrap."))
PREFER_LEVEL = 0.05  # a law is preferred on held-out error only when a paired test over runs says so at this level
EXACT_FLIPS = 16  # up to this many runs every sign pattern is enumerated; beyond, FLIP_DRAWS random ones
FLIP_DRAWS = 20_000


def loro_better(a: dict, b: dict, level: float = PREFER_LEVEL) -> dict | None:
    """Does the law of compare row ``a`` predict held-out runs better than that of row ``b``?

    A one-sided paired test over the runs both predicted, on their per-run leave-one-run-out mean
    squared errors (``loro_runs``, fit/holdout.py): under "equally good" each run's difference is
    as likely either sign, so ``p`` is the share of sign flips of the differences whose mean gain is
    at least the one observed (every flip up to ``EXACT_FLIPS`` runs, else ``FLIP_DRAWS`` seeded
    draws).  A lower RMSE by any margin is no finding: two laws that fit alike differ by seed
    noise, and the lower one is then a coin's toss (benchmarks/bench_verdicts.py, kind ``compare``).

    Returns {better, p, runs, wins} (``wins``: runs where ``a`` is better), or None when either
    row has no per-run errors (a fit.json written before them) or fewer than 2 runs are shared."""
    ra, rb = a.get("loro_runs"), b.get("loro_runs")
    if not ra or not rb:
        return None
    common = sorted(set(ra) & set(rb))
    if len(common) < 2:
        return None
    d = np.array([rb[k] - ra[k] for k in common], dtype=float)  # > 0: a is better on that run
    n, obs = len(d), float(d.mean())
    if n <= EXACT_FLIPS:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        p = float(np.mean(signs @ d / n >= obs - 1e-15 * max(1.0, abs(obs))))
    else:
        signs = np.random.default_rng(0).choice((-1.0, 1.0), size=(FLIP_DRAWS, n))
        p = float((1 + np.sum(signs @ d / n >= obs - 1e-15 * max(1.0, abs(obs)))) / (FLIP_DRAWS + 1))
    return {"better": bool(obs > 0 and p <= level), "p": p, "runs": n, "wins": int((d > 0).sum())}


def fitted_label(doc: dict) -> str:
    """The fitted law's label (``depth-delusion[log]`` …) from a fit.json's law and options."""
    opts = doc.get("options")
    return label(law_of_label(doc["law"], opts) if opts and "user" in opts else builtin_of_label(doc["law"], opts))


def preferred(doc: dict | None) -> dict | None:
    """{law, alternative, by, line, fit, test} when another law should be drawn instead of the fitted one, else None.

    The candidate laws are those of another family than the fitted one (another D_crit form of
    depth-delusion rests on D_crit too); the one with the lowest leave-one-run-out error is drawn
    when it predicts the held-out runs better than the fitted law by a paired test over runs
    (``loro_better``, at ``PREFER_LEVEL`` shared among the candidates): a lower error by any margin
    was a coin's toss between laws that fit alike.  ``fit`` is a minimal fit document (law,
    options, params); ``test`` the paired test.
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
    key, col, name = BY[0]
    if alt is None or alt.get(col) is None:
        return None
    family = mine.split("[", 1)[0]
    others = [r for r in rows.values() if r["law"].split("[", 1)[0] != family and r.get(col) is not None]
    if not others:
        return None
    win = min(others, key=lambda r: r[col])
    test = loro_better(win, alt, PREFER_LEVEL / len(others))
    if win[col] >= alt[col] or not test or not test["better"]:
        return None
    best = cmp.get("best") or {}
    notes = [
        f"the lowest {n} error is {best[k]}'s (not tested)"
        for k, _, n in BY[1:]
        if best.get(k) not in (None, win["law"])
    ]
    first = best.get(key)
    if first not in (None, win["law"], mine) and first in rows and first.split("[", 1)[0] == family:
        notes.insert(0, f"{first} ranks first ({rows[first][col]:.3g}) but rests on {claim.get('parameter')} too")
    why = (
        f"{name} RMSE {win[col]:.3g} vs {alt[col]:.3g} nats for {mine}, lower on {test['wins']} of "
        f"{test['runs']} runs, paired test p = {test['p']:.2g}" + "".join(f"; {x}" for x in notes)
    )
    head = HEADS.get((doc.get("identification") or {}).get("verdict")) or f"{claim.get('parameter')} not identified"
    line = (
        f"{head}: the held-out comparison prefers {win['law']} ({why}), drawn solid; {mine} dashed as the alternative"
    )
    law = law_of_label(win["law"], win.get("options"))
    return {
        "law": win["law"],
        "alternative": mine,
        "by": key,
        "line": line,
        "fit": {"law": law.name, "options": dict(law.options), "params": win["params"]},
        "test": test,
    }


def drawn(fit: dict | None) -> dict | None:
    """What a figure draws of a fit, as its verdict allows: {fit, style, label, line, alternative}.

    * a law the held-out comparison prefers (``preferred``): that law solid, the fitted one dashed;
    * D_crit ``located`` (or an identified claim): the fitted law, solid;
    * ``no-penalty``: the law without its penalty (the fit the BIC test compared it with), solid —
      the data show no penalty, so none is drawn;
    * ``not-located`` (or a claim not identified): the fitted law dashed, and the line says why.
    ``fit`` is a minimal fit document (law, options, params); ``alternative`` one to draw dashed beside."""
    if not fit or not fit.get("params"):
        return None
    ident = fit.get("identification") or {}
    lab = fitted_label(fit)
    mine = {"law": fit["law"], "options": fit.get("options") or {}, "params": fit["params"]}
    pref = preferred(fit)
    if pref:
        return {
            "fit": pref["fit"],
            "style": "solid",
            "label": f"{pref['law']} (held-out preferred)",
            "line": pref["line"],
            "alternative": {"fit": mine, "label": f"{lab} (alternative)"},
        }
    v = ident.get("verdict")
    if v == "no-penalty":
        without = ((fit.get("checks") or {}).get("penalty_support") or {}).get("params_without")
        if without:
            return {
                "fit": {**mine, "params": without},
                "style": "solid",
                "label": f"the {lab} law without its penalty",
                "line": f"{verdict_line(ident)}: drawn without its penalty",
                "alternative": None,
            }
    if (ident.get("claim") or {}).get("identified") is False:
        return {
            "fit": mine,
            "style": "dashed",
            "label": f"the fitted {lab} law (its claim not identified)",
            "line": verdict_line(ident),
            "alternative": None,
        }
    return {"fit": mine, "style": "solid", "label": f"the fitted {lab} law", "line": None, "alternative": None}


# -- the verdicts of a fit.json, as dw fit, the report and the README say them ------------------


def flags(fit: dict) -> tuple[dict, dict]:
    """(optimum flags, D_crit flags) of a fit document; recomputed from ``derived`` for a fit.json
    written before ``identification`` held them."""
    ident = fit.get("identification") or {}
    derived = fit.get("derived") or {}
    optimum = bound_by_claim(ident.get("optimum") or meaningful_optimum(derived), ident.get("claim"))
    return optimum, ident.get("dcrit_range") or meaningful_dcrit(derived)


def truth_line(fit) -> str | None:
    """The one line said when the fit's claim is not identified: the law the held-out comparison
    prefers, drawn instead, or else the verdict; None when the claim is identified (or no fit)."""
    pref = preferred(fit)
    if pref:
        return pref["line"]
    ident = (fit or {}).get("identification") or {}
    return verdict_line(ident) if (ident.get("claim") or {}).get("identified") is False else None


def identification_notes(fit: dict) -> list[str]:
    """The verdict lines under a fit: the claim, each optimum that is not identified, the D_crit
    values below one layer, the preferred law, and what the fit rests on."""
    ident = fit.get("identification") or {}
    if not ident:
        return []
    out = [verdict_line(ident)]
    claim = ident.get("claim") or {}  # optima the claim leaves unidentified: optima_caveat says so once
    said = _claim_why(claim) if claim.get("identified") is False else None
    out += [
        f"{k}: not identified ({v['because']})"
        for k, v in ident.get("optimum", {}).items()
        if not v["identified"] and v["because"] != said
    ]
    out += [x for x in (not_identified_line(ident), (preferred(fit) or {}).get("line")) if x]
    return out + [rests_on(ident)]


def optima_caveat(fit: dict) -> str | None:
    """Every optimum is derived from the law's claim-carrying parameters: when the claim is not
    identified, neither are they (one warning line), else None."""
    claim = (fit.get("identification") or {}).get("claim") or {}
    if claim.get("identified") is not False:
        return None
    return (
        f"warning: derived from {claim.get('parameter')}, which the fit does not identify "
        f"({claim.get('because')}): these optima are not identified either"
    )


def parameter_flags(fit: dict) -> dict[str, list[str]]:
    """{parameter: what to say beside it}: pinned, on a bound, an interval containing 0, an
    interval withheld or flagged (fit/boot.py)."""
    pinned, held, flagged = fit.get("pinned") or {}, fit.get("ci_withheld") or {}, fit.get("ci_flagged") or {}
    out = {}
    for k in fit.get("params") or {}:
        f = ["pinned"] if k in pinned else []
        if k in (fit.get("on_bound") or []):
            f.append("on bound")
        c = (fit.get("ci") or {}).get(k)
        if c and c[0] <= 0 <= c[1] and k not in pinned:
            f.append("CI ∋ 0")
        if k in held:
            f.append("interval withheld: see the notes")
        elif k in flagged:
            f.append("interval flagged: few refits converged")
        out[k] = f
    return out
