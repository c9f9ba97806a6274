"""Is D_crit located?  The identification ladder of a law with a depth penalty, decided once, at
fit time, and stored in fit.json (``identification.verdict``, ``identification.widths``).

A structural penalty can lower BIC while its change point is unpinned: "a penalty helps" is not
"D_crit is here".  So the verdict is a ladder, and each rung rests on what it claims:

``no-penalty``
    The law without the penalty is as good: the penalty does not lower BIC by more than 2
    (fit/verdicts.py ``penalty_support``, the runs as its sample size), or fewer than
    ``MIN_BEYOND`` runs lie beyond the fitted D_crit (a penalty through one run fits its noise).  Nothing is
    said about where D_crit is — only that no run of the grid shows it (it may lie beyond the
    deepest run, or there may be none).
``not-located``
    A penalty helps, but D_crit's interval is not pinned at any width of the grid (the reason
    names the interval), or the sign of its width dependence is not settled.
``located``
    At one width W of the grid at least, D_crit(W)'s interval [lo, hi] is bounded, lies inside
    the depths the grid ran at that width (lo ≥ the shallowest, hi ≤ the deepest), and is
    narrow: hi/lo ≤ ``MAX_RATIO``; and, where the grid has more than one width, the sign of the
    width dependence is settled by its own interval (power form: p's interval excludes 0; the
    log form, κ·ln W with κ > 0, rises by construction, and the line says the form assumes it).

The intervals are one simultaneous band over the grid's widths (``band``: the bootstrap's sup-t
band of log D_crit(W), at the fit's level), not one interval per width: the verdict claims every
located width at once, and with per-width 95% intervals "one of four widths misses" happens more
often than 5% (measured: 11% of located power-form fits).

Per width, ``widths[W]`` holds {verdict, value, interval, depths, because}; a width is
``located`` under the same rule, less the sign.  Every reader (``dw fit``, the report, the
figures, ``dw suggest``, ``dw status``) prints this record; none decides again.

The rule's error rates are measured on planted worlds (benchmarks/bench_verdicts.py;
docs/verdicts.md): D_crit inside the grid, below its shallowest depth, beyond its deepest, no
penalty at all, shapes pooled under a shape-blind law, both D_crit forms, two noise levels.
"""

from __future__ import annotations

from depthwidth.fit.defaults import default

import math

import numpy as np

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


def _width_rung(value, iv, depths: tuple[float, float], supported: bool, level: float) -> dict:
    """One width's rung: {verdict, value, interval, depths, because}."""
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
            because=f"its {pct} interval {_fmt_iv(iv)} spans {ratio} (located: at most {MAX_RATIO:g}×)",
        )
    elif iv[0] < lo_d or iv[1] > hi_d:
        out.update(
            verdict="not-located",
            because=f"its {pct} interval {_fmt_iv(iv)} reaches outside the grid's depths at this width "
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
        iv = (dci or {}).get(f"dcrit[W={w}]")  # None: withheld (fit/intervals.py), or no bootstrap
        if iv is not None and sim is not None:
            iv = sim[str(w)]
        rungs[str(w)] = _width_rung(value, iv, (at.min(), at.max()), supported, level)
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
