"""The other verdicts dw prints, as kinds of benchmarks/bench_verdicts.py (registered there).

Each kind plants a world where the answer is known with its own small generator, runs the
verdict's real code path at dw's default settings, and returns ``{yes, wrong, ...}`` per table
(bench_verdicts.py's contract: false yes = a yes where the truth is no, or a yes that names the
wrong answer where the truth is yes; power = the share of yes where the truth is yes).  A kind
whose verdict is said per item (a held-out point, a pair of cells) returns ``yes`` as the share of
its items, so the rate is per item.

Noise: ``NOISE`` is bench_verdicts.py's (sigma of log loss per run: 0.005 and 0.02).

Kinds (the verdict, where it is decided, the worlds):

- ``lr_dep`` / ``lr_flat``: ``dw fit --law lr``'s lines (fit/tuning.py ``lr_verdicts``):
  "lr* falls/rises with width|depth" and "lr* is flat in width|depth", on tuned tables planted
  from lr*(D, W) = c·D^e_D·W^e_W (µP-like: e_W = 0, e_D = -0.5; SP-like: e_W = -1, e_D = 0);
- ``inside``: the Variable-Width paper's claims against analysis.json records (report/inside.py),
  planted per layer: the × model the same as uniform (false yes) or as the paper claims (power);
- ``ushape`` / ``wmono`` / ``pairs``: the report's loss-grid lines (report/tables.py): "a
  U-shape", "loss does NOT fall monotonically with width", and each pair's winner;
- ``forecast``: ``dw status``'s FLAG (fit/forecast.py ``forecast`` + ``flag``) on a healthy run
  (false yes) and a run 4% above its law (power), at 30% and 60% of its tokens;
- ``match``: the FLOPs-to-match fraction's interval excluding 1 (fit/match.py): × the same as
  uniform (false yes) or needing 0.8 of its FLOPs (power).
"""

from __future__ import annotations

import math

import numpy as np

NOISE = {"lo": 0.005, "hi": 0.02}  # per-run sigma of log loss (bench_verdicts.py's)


# -- learning-rate laws: dw fit --law lr ------------------------------------------------------

LR_WORLDS = {"mup": {"width": 0.0, "depth": -0.5}, "sp": {"width": -1.0, "depth": 0.0}}
LR_GRID = tuple(1e-4 * 10 ** (k / 2) for k in range(8))  # 1e-4 .. 3e-1, half a decade apart
LR_CURV = 0.04  # log-loss rise per (decade from the optimum)^2: 1% at half a decade off


def lr_table(world: str, noise: str, seed: int):
    """A tuned sweep: 3 depths x 4 widths, each at LR_GRID; loss = a Chinchilla-like base times a
    parabola in log10 lr around lr*(D, W) = 3e-3·(D/8)^e_D·(W/512)^e_W, seed noise per run."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    e = LR_WORLDS[world]
    rows = []
    for d in (4, 8, 16):
        for w in (256, 512, 1024, 2048):
            n = 12.0 * d * w * w
            opt = 3e-3 * (d / 8) ** e["depth"] * (w / 512) ** e["width"]
            base = 1.8 + 400.0 / n**0.3
            for lr in LR_GRID:
                y = base * math.exp(LR_CURV * math.log10(lr / opt) ** 2 + rng.normal(0.0, NOISE[noise]))
                g = f"d{d}w{w}"
                rows.append(
                    {
                        "run": f"{g}_{lr:g}",
                        "group": g,
                        "optim.lr": lr,
                        "params": n,
                        "depth": d,
                        "width": w,
                        "tokens": 20 * n,
                        "loss": y,
                    }
                )
    return pd.DataFrame(rows)


def _lr_line(world: str, var: str, noise: str, seed: int) -> str | None:
    from depthwidth.fit.tuning import lr_law

    lines = lr_law(lr_table(world, noise, seed), seed=seed)["verdicts"]
    return next((x for x in lines if f" {var}" in x.split(":")[0]), None)


def _lr_dep(case: str, world: str, var: str, noise: str, seed: int) -> dict:
    """ "lr* falls/rises with VAR" said?  wrong: the sign is not the planted one."""
    line = _lr_line(world, var, noise, seed) or ""
    yes = line.startswith(("lr* falls", "lr* rises"))
    e = LR_WORLDS[world][var]
    return {"yes": yes, "wrong": yes and (line.startswith("lr* falls") != (e < 0)), "line": line}


def _lr_flat(case: str, world: str, var: str, noise: str, seed: int) -> dict:
    """ "lr* is flat in VAR" said?"""
    line = _lr_line(world, var, noise, seed) or ""
    return {"yes": line.startswith("lr* is flat"), "wrong": False, "line": line}


# -- inside the models: report/inside.py's claims --------------------------------------------

INSIDE_DEPTH = 6  # the demo's 96 x 6
INSIDE_CLAIMS = ("valley", "entropy", "dead", "lens", "smooth")
# per-run seed spread of each planted measure (sd), and the effect the paper claims (× vs uniform)
INSIDE_SD = {"entropy": 0.03, "dead": 0.01, "ce": 0.08, "kl": 0.15}


def _inside_doc(shape: str, world: str, rng) -> dict:
    """One run's analysis.json (the keys the report reads), per layer; ``world``: ``same`` (× as
    uniform; uniform with a valley) or ``paper`` (× as the paper says: no valley, fewer dead units,
    an earlier and smoother lens) or ``novalley`` (no valley in either)."""
    L = INSIDE_DEPTH
    mid = np.exp(-(((np.arange(L) - (L - 1) / 2) / 1.2) ** 2))  # 1 in the middle layers
    x = shape == "x" and world == "paper"
    floor = 0.35 if world == "novalley" else (0.4 if x else 0.1)
    H = 0.6 - (0.6 - floor) * mid
    dead = 0.02 + (0.01 if x else 0.05) * mid
    ce = 3.5 + 4.0 * np.exp(-np.arange(1, L + 1) / (1.1 if x else 1.5))
    kl = (0.25 if x else 0.35) * np.exp(-np.arange(L) / 3.0)
    H = np.clip(H + rng.normal(0, INSIDE_SD["entropy"], L), 0, 1)
    dead = np.clip(dead + rng.normal(0, INSIDE_SD["dead"], L), 0, 1)
    ce = ce + rng.normal(0, INSIDE_SD["ce"], L)
    kl = kl * np.exp(rng.normal(0, INSIDE_SD["kl"], L))
    widths = [96] * L if shape == "uniform" else [int(96 * (1.3 - 0.6 * m)) for m in mid]
    layers = [
        {
            "entropy_prefix": float(H[i]),
            "mlp_dead": float(dead[i]),
            "lens_ce": float(ce[i]),
            "lens_kl_prev": float(kl[i]),
        }
        for i in range(L)
    ]
    return {"schema": "dw.analysis/2", "widths": widths, "eval_loss": 3.5, "layers": layers, "options": {}}


def inside_analyses(world: str, seeds: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {
            "run": f"{s}-{k}",
            "state": "done",
            "shape": s,
            "depth": INSIDE_DEPTH,
            "width": 96,
            "doc": _inside_doc(s, world, rng),
        }
        for s in ("uniform", "x")
        for k in range(seeds)
    ]


def _inside(case: str, claim: str, world: str, seeds: int, seed: int) -> dict:
    """The claim's verdict "supported"?  (Truth: the world is the paper's, or for the valley a
    world with one.)"""
    from depthwidth.report.inside import tables

    t = tables(inside_analyses(world, seeds, seed))["inside_claims"]
    row = t.rows[INSIDE_CLAIMS.index(claim)]  # the table's rows, in the claims' order
    return {"yes": row["verdict"] == "supported", "wrong": False, "verdict": row["verdict"]}


def _inside_truth(spec) -> bool:
    claim, world, _ = spec
    return world in ("same", "paper") if claim == "valley" else world == "paper"


# -- the report's loss-grid lines: report/tables.py -------------------------------------------

GRID_WIDTHS = (128, 256, 512, 1024)
GRID_DEPTHS = (2, 4, 8, 16, 32)  # with the widths: (D, W) and (4D, W/2) have the same D·W², a pair at ratio 1
GRID_WORLDS = {
    # 1.8 + 2·W^-0.5 + a_d/D (+ gamma·max(0, (D - 12)/12)) (+ c·ln D at fixed D·W²) (+ a bump at the widest width)
    "flat": {"a_d": 0.64, "gamma": 0.0, "shape": 0.0, "wide": 0.0},  # gains with depth fall to 0.02 nats from 16 to 32
    "u": {"a_d": 0.64, "gamma": 0.06, "shape": 0.0, "wide": 0.0},  # a penalty past 12 layers: a U at every width
    "wide": {"a_d": 0.64, "gamma": 0.0, "shape": 0.0, "wide": 0.06},  # the widest width worse: not monotone
    "nshape": None,  # loss a function of N = 12·D·W² only: no winner at matched parameters
    "deep": None,  # the same plus 0.02·ln D: the shallow-wide model of each pair better by 0.028 nats
}


def grid_loss(world: str, d: int, w: int) -> float:
    n = 12.0 * d * w * w
    if world in ("nshape", "deep"):
        return 1.8 + 40.0 / n**0.25 + (0.02 * math.log(d) if world == "deep" else 0.0)
    p = GRID_WORLDS[world]
    return (
        1.8
        + 2.0 * w**-0.5
        + p["a_d"] / d
        + p["gamma"] * max(0.0, (d - 12) / 12)
        + (p["wide"] if w == max(GRID_WIDTHS) else 0.0)
    )


def grid_runs(world: str, noise: str, seeds: int, seed: int) -> list[dict]:
    """The report's run records of a uniform sweep over GRID_DEPTHS x GRID_WIDTHS, ``seeds`` runs a cell."""
    rng = np.random.default_rng(seed)
    out = []
    for d in GRID_DEPTHS:
        for w in GRID_WIDTHS:
            n = 12.0 * d * w * w
            for k in range(seeds):
                out.append(
                    {
                        "run": f"d{d}w{w}s{k}",
                        "state": "done",
                        "shape": "uniform",
                        "depth": d,
                        "width": w,
                        "loss": grid_loss(world, d, w) * math.exp(rng.normal(0.0, NOISE[noise])),
                        "params": n,
                        "params_non_embedding": n,
                        "flops_per_token": 6 * n,
                        "kv_bytes_per_token": 4 * d * w,
                        "flops": 6 * n * 20 * n,
                        "tokens": 20 * n,
                        "widths": [w] * d,
                    }
                )
    return out


def _cells(world, noise, seeds, seed):
    from depthwidth.report.document import group_cells

    return group_cells(grid_runs(world, noise, seeds, seed))


def _ushape(case: str, world: str, noise: str, seeds: int, seed: int) -> dict:
    """ "a U-shape" said of loss vs depth at width 512?"""
    from depthwidth.report.tables import _ushape as table

    notes = table(_cells(world, noise, seeds, seed), 512, {}).notes
    line = next((x for x in notes if "U-shape" in x), "")
    return {"yes": line.startswith("minimum inside the depth range: a U-shape"), "wrong": False, "line": line}


def _wmono(case: str, world: str, noise: str, seeds: int, seed: int) -> dict:
    """ "loss does NOT fall monotonically with width" said at depth 8?"""
    from depthwidth.report.tables import _wsweep as table

    notes = table(_cells(world, noise, seeds, seed), 8, {}).notes
    line = next((x for x in notes if "monoton" in x), "")
    return {"yes": line.startswith("loss does NOT"), "wrong": False, "line": line}


def _pairs(case: str, world: str, noise: str, seeds: int, seed: int) -> dict:
    """Per pair: a winner named (yes: the share of pairs); wrong: the share naming the one whose
    planted loss is higher.  In ``nshape`` only the pairs of equal planted loss count (the same
    D·W²: no winner is right there); in ``deep`` every pair has one (shallow-wide)."""
    from depthwidth.report.tables import _pairs as table

    rows = table(_cells(world, noise, seeds, seed), {}).rows
    named = wrong = counted = 0
    for r in rows:
        (da, wa), (db, wb) = (tuple(int(v) for v in r[k].split("L×")) for k in ("shallow_wide", "deep_narrow"))
        truth = grid_loss(world, db, wb) - grid_loss(world, da, wa)  # > 0: shallow-wide better
        if world == "nshape" and abs(truth) > 1e-12:
            continue
        counted += 1
        said = r.get("winner")
        if said in ("shallow-wide", "deep-narrow"):
            named += 1
            wrong += abs(truth) < 1e-12 or (said == "shallow-wide") != (truth > 0)
    n = max(1, counted)
    return {"yes": named / n, "wrong": wrong / n, "pairs": counted}


# -- dw status's forecast flag: fit/forecast.py ----------------------------------------------

FC_TOKENS = 1e9
FC_STEPS = 2000


def fc_schedule() -> dict:
    """A cosine run with 2% warm-up decaying to a tenth of its peak, one lr per step."""
    s = np.arange(FC_STEPS)
    warm = 40
    lr = np.where(
        s < warm, (s + 1) / warm, 0.1 + 0.45 * (1 + np.cos(np.pi * np.clip((s - warm) / (FC_STEPS - warm), 0, 1)))
    )
    return {"tokens": FC_TOKENS / FC_STEPS * (s + 1), "lr": 3e-3 * lr}


def fc_curve(sched: dict) -> np.ndarray:
    """Expected held-out loss per step: E + B·S1^-0.35 − C·S2 with the annealing momentum of Tissue
    et al. (S1: lr-weighted tokens; S2: the lr's drops, each carried with decay 0.99 per step: a lag
    of ~100 steps, 5% of the run) -- the full form, lag included, which the forecast takes without it."""
    rel = sched["lr"] / sched["lr"].max()
    s1 = np.cumsum(rel) * (FC_TOKENS / FC_STEPS) / 1e6  # millions of lr-weighted tokens
    drop = np.concatenate([[0.0], np.maximum(0.0, -np.diff(rel))])
    m = np.zeros_like(rel)
    for i in range(1, len(rel)):
        m[i] = 0.99 * m[i - 1] + drop[i]
    s2 = np.cumsum(m) / len(rel) * 4.0
    return 2.2 + 3.0 * s1**-0.35 - 0.08 * s2


def _forecast(case: str, world: str, at: float, noise: str, seed: int) -> dict:
    """FLAG said of a run (forecast at ``at`` of its tokens vs the law's calibrated 95% interval)?
    The law predicts the healthy run's final loss with error sd 0.01 (log) and its interval is
    calibrated for a measured loss (seed noise ``noise`` added in quadrature); the run is healthy
    (its curve ends where its seed puts it) or bad (4% above, throughout: a bad lr or node)."""
    from depthwidth.fit.forecast import flag, forecast

    rng = np.random.default_rng(seed)
    sched = fc_schedule()
    curve = fc_curve(sched)
    sig = NOISE[noise]
    end = curve[-1]
    run = curve * math.exp(rng.normal(0.0, sig) + (0.04 if world == "bad" else 0.0))
    every = 20  # a held-out evaluation every 20 steps, fixed batches: small point noise
    idx = np.arange(every - 1, int(at * FC_STEPS), every)
    t = sched["tokens"][idx]
    y = run[idx] * np.exp(rng.normal(0.0, 0.002, len(idx)))
    f = forecast(t, y, FC_TOKENS, sched, seed=seed)
    s_law = 0.01
    centre = end * math.exp(rng.normal(0.0, s_law))
    half = 1.96 * math.hypot(s_law, sig)
    fl = flag(f, centre * math.exp(-half), centre * math.exp(half))
    return {"yes": bool(fl), "wrong": False, "forecast": None if f is None else [f.lo, f.mean, f.hi]}


# -- FLOPs to match uniform: fit/match.py -----------------------------------------------------

MATCH_SIZES = {
    4: ((4, 256), (6, 384), (8, 512), (12, 768)),
    6: ((4, 256), (6, 384), (8, 512), (12, 768), (16, 1024), (20, 1280)),
}


def match_table(world: str, sizes: int, seeds: int, noise: str, seed: int):
    """Uniform and × runs at ``sizes`` (D, W), ``seeds`` each: final loss E + A·(C/1e18)^-0.15 at C =
    6·N·20N; the × model the same (``same``) or reaching each loss with 0.8 of the FLOPs (``x08``)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []
    for d, w in MATCH_SIZES[sizes]:
        n = 12.0 * d * w * w
        c = 6.0 * n * 20 * n
        for shape in ("uniform", "x"):
            ce = c / 0.8 if shape == "x" and world == "x08" else c
            for k in range(seeds):
                loss = (1.8 + 2.0 * (ce / 1e18) ** -0.15) * math.exp(rng.normal(0.0, NOISE[noise]))
                rows.append(
                    {
                        "run": f"{shape}-d{d}w{w}s{k}",
                        "shape": shape,
                        "depth": d,
                        "width": w,
                        "loss": loss,
                        "flops": c,
                        "mean_width": w * (0.89 if shape == "x" else 1.0),
                        "kv_bytes_per_token": 4.0 * d * w * (0.9 if shape == "x" else 1.0),
                    }
                )
    return pd.DataFrame(rows)


def _match(case: str, world: str, sizes: int, seeds: int, noise: str, seed: int) -> dict:
    """The × row at the largest uniform size: does its FLOPs-fraction interval exclude 1?  wrong: it
    lies above 1 in a world where × needs less."""
    from depthwidth.fit.match import flops_to_match

    m = flops_to_match(match_table(world, sizes, seeds, noise, seed), seed=seed).to_dict()
    top = max(m["rows"], key=lambda r: r["flops_uniform"])
    ci = top["flops_fraction_ci"]
    lo = ci[0] if ci else None
    hi = (math.inf if ci[1] is None else ci[1]) if ci else None
    yes = ci is not None and lo is not None and (hi < 1.0 or lo > 1.0)
    return {"yes": yes, "wrong": yes and lo > 1.0, "fraction": top["flops_fraction"], "ci": ci}


# -- the law comparison: fit/verdicts.py preferred, fit/analyses/compare.py dcrit_preference ----------

CMP_WIDTHS = (256, 512, 1024)
CMP_DEPTHS = (4, 8, 16, 32)
CMP_WORLDS = {
    # depth-delusion (A/N^0.3 + B/T^0.35 + W^-0.3·max(0, (D - D_crit)/D_crit)) with D_crit inside the
    # grid in either form, or beyond it (no run past it); or the width-depth law
    "log": ("log", 2.0),  # D_crit(W) = 2·ln W: 11.1, 12.5, 13.9
    "power": ("power", (0.8, 0.44)),  # D_crit(W) = 0.8·W^0.44: 9.6, 13.0, 17.7
    "beyond": ("log", 12.0),  # 67-83 layers
    "wd": None,  # 1.0 + 25/W^0.5 + 1.2/D^0.6 + B/T^0.35
}


def cmp_loss(world: str, d: float, w: float, t: float) -> float:
    n = 12.0 * d * w * w
    if world == "wd":
        return 1.0 + 25.0 / w**0.5 + 1.2 / d**0.6 + 2000.0 / t**0.35
    form, k = CMP_WORLDS[world]
    dc = k * math.log(w) if form == "log" else k[0] * w ** k[1]
    return 400.0 / n**0.3 + 2000.0 / t**0.35 + w**-0.3 * max(0.0, (d - dc) / dc)


def depth_width_table(widths, depths, t_floor: float, loss, noise: str, seed: int):
    """A run per (width, depth), N = 12·D·W², at two budgets (half and all of max(20·N, ``t_floor``)
    tokens); ``loss(d, w, t)`` the planted law, per-run seed noise and a fifth of it per point."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    sig = NOISE[noise]
    rows = []
    for w in widths:
        for d in depths:
            n = 12.0 * d * w * w
            t_max = max(20.0 * n, t_floor)
            u = rng.normal(0.0, sig)
            for f in (0.5, 1.0):
                t = f * t_max
                rows.append(
                    {
                        "run": f"w{w}d{d}",
                        "params": n,
                        "tokens": t,
                        "depth": d,
                        "width": w,
                        "loss": loss(d, w, t) * math.exp(u + rng.normal(0.0, sig / 5)),
                    }
                )
    return pd.DataFrame(rows)


def cmp_table(world: str, noise: str, seed: int):
    """12 runs (3 widths x 4 depths), each at two token budgets; per-run seed noise and a fifth of
    it per point (bench_verdicts.py's convention)."""

    return depth_width_table(CMP_WIDTHS, CMP_DEPTHS, 2e9, lambda d, w, t: cmp_loss(world, d, w, t), noise, seed)


CACHE_VERSION = "2"  # bump when the fit's compare section changes shape


def _cached(key: str, make):
    """A JSON document computed once per key and kept under the temp folder: the two verdicts of
    one law comparison (preferred, dcrit_preference) read the same fits."""
    import json
    import os
    import tempfile
    from pathlib import Path

    d = Path(tempfile.gettempdir()) / f"dw-bench-verdicts-{os.getuid()}"
    d.mkdir(exist_ok=True)
    f = d / f"{key}-v{CACHE_VERSION}.json"
    if f.exists():
        try:
            return json.loads(f.read_text())
        except ValueError:
            pass
    doc = make()
    tmp = f.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, f)
    return doc


def cmp_fit(world: str, noise: str, seed: int) -> dict:
    """``dw fit --law depth-delusion --compare width-depth`` (both D_crit forms take part), at defaults:
    the fit document's compare and identification sections."""

    def make():
        from depthwidth.fit.pipeline import run_fit

        res = run_fit(
            runs=cmp_table(world, noise, seed), law="depth-delusion", compare="width-depth", write=False, seed=seed
        )
        keep = ("law", "options", "compare", "identification", "params")
        return {k: res.get(k) for k in keep}

    doc = _cached(f"cmp-{world}-{noise}-{seed}", make)
    if any("penalty_supported" not in r for r in doc["compare"]["laws"] if r["law"].startswith("depth-delusion")):
        doc = _cached(f"cmp-{world}-{noise}-{seed}-penalty", make)  # fitted before the rows said it
    return doc


def _old_pick(rows: list, col: str = "loro_rmse"):
    """The rule before #34's paired test: the lowest held-out error wins, by any margin."""
    have = [r for r in rows if r.get(col) is not None]
    return min(have, key=lambda r: r[col])["law"] if have else None


def _compare(case: str, world: str, noise: str, seed: int) -> dict:
    """ "the held-out comparison prefers X" said (preferred)?  wrong: X is not the planted law."""
    from depthwidth.fit.verdicts import preferred

    doc = cmp_fit(world, noise, seed)
    pref = preferred(doc)
    truth = "width-depth" if world == "wd" else "depth-delusion"
    said = pref["law"] if pref else None
    # before: the same rule with "lowest LORO wins" (any margin), other families only
    claim = (doc["identification"] or {}).get("claim") or {}
    rows = [r for r in doc["compare"]["laws"] if r.get("params")]
    others = [r for r in rows if not r["law"].startswith("depth-delusion")]
    mine = next((r for r in rows if r["law"] == "depth-delusion[log]"), None)
    old = None
    if claim.get("identified") is False and mine and others:
        w = min(others, key=lambda r: r["loro_rmse"])
        old = w["law"] if w["loro_rmse"] < mine["loro_rmse"] else None
    return {
        "yes": said is not None,
        "wrong": said is not None and not said.startswith(truth),
        "said": said,
        "before": {"yes": old is not None, "wrong": old is not None and not old.startswith(truth)},
        "ident": (doc["identification"] or {}).get("verdict"),
    }


def _dcrit_form(case: str, world: str, noise: str, seed: int) -> dict:
    """ "D_crit form preferred by the data: F" said?  wrong: F is not the planted form (any form is
    wrong where D_crit lies beyond the grid: the two forms then fit alike)."""
    from depthwidth.fit.analyses.compare import dcrit_preference

    doc = cmp_fit(world, noise, seed)
    p = dcrit_preference(doc["compare"]["laws"])
    said = (p or {}).get("prefers")
    old = _old_pick([r for r in doc["compare"]["laws"] if r["law"].startswith("depth-delusion[")])
    old = old and ("log" if "[log" in old else "power")
    planted = CMP_WORLDS[world][0] if world in ("log", "power") else None
    return {
        "yes": said is not None,
        "wrong": said is not None and said != planted,
        "said": said,
        "before": {"yes": old is not None, "wrong": old is not None and old != planted},
    }


# -- fixed vs tuned: fit/tuning.py comparison ("the claim CHANGES with tuning") ---------------

TUNE_LRS = (1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2)
CHIN = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 400.0, "beta": 0.3}


def tune_table(world: str, noise: str, seed: int):
    """12 Chinchilla configurations (N = 1e7·1.7^g, T/N = 20 or 80), each trained at TUNE_LRS; the
    loss a parabola in log10 lr around lr*: the same 1e-3 for every group (``flat``: one lr for
    every rung is each group's best, so the claim cannot change) or falling from 1e-2 to 1e-4
    across N (``slope``: the large models under-tuned at 1e-3, so alpha moves)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []
    ns = [1e7 * 1.7**g for g in range(12)]
    lo, hi = math.log(ns[0]), math.log(ns[-1])
    for g, n in enumerate(ns):
        opt = 1e-3 if world == "flat" else 10 ** (-2.0 - 2.0 * (math.log(n) - lo) / (hi - lo))
        t = (20 if g % 2 == 0 else 80) * n
        base = CHIN["E"] + CHIN["A"] / n ** CHIN["alpha"] + CHIN["B"] / t ** CHIN["beta"]
        for lr in TUNE_LRS:
            y = base * math.exp(LR_CURV * math.log10(lr / opt) ** 2 + rng.normal(0.0, NOISE[noise]))
            rows.append({"run": f"g{g}_{lr:g}", "group": f"g{g}", "optim.lr": lr, "params": n, "tokens": t, "loss": y})
    return pd.DataFrame(rows)


def _tuning(case: str, world: str, noise: str, seed: int) -> dict:
    """ "the claim CHANGES with tuning" said (dw fit on a tuned sweep, default --tuned best)?"""
    from depthwidth.fit.pipeline import run_fit

    res = run_fit(runs=tune_table(world, noise, seed), law="chinchilla", write=False, seed=seed)
    line = ((res.get("tuning") or {}).get("fixed") or {}).get("line") or ""
    return {"yes": line.startswith("the claim CHANGES"), "wrong": False, "line": line}


# -- hold-out: fit/holdout.py's per-point "inside" (a held-out loss outside its prediction interval) --


def hold_table(world: str, noise: str, seed: int):
    """30 runs, N 5e7-5e9 and T/N 5-50 drawn log-uniformly, each at 3 budgets: Chinchilla (``law``),
    or the same with the runs of the top 20% of compute 0.03·ln(C/C_80) above it (``bend``: the law
    fails at scale, where ``--holdout largest`` tests it)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    n = np.exp(rng.uniform(math.log(5e7), math.log(5e9), 30))
    tmax = n * np.exp(rng.uniform(math.log(5.0), math.log(50.0), 30))
    c80 = float(np.quantile(6 * n * tmax, 0.8))
    rows = []
    for i in range(30):
        u = rng.normal(0.0, NOISE[noise])
        for f in (0.25, 0.5, 1.0):
            t = f * tmax[i]
            loss = CHIN["E"] + CHIN["A"] / n[i] ** CHIN["alpha"] + CHIN["B"] / t ** CHIN["beta"]
            if world == "bend":
                loss += 0.03 * max(0.0, math.log(6 * n[i] * t / c80))
            rows.append(
                {
                    "run": f"r{i}",
                    "params": n[i],
                    "tokens": t,
                    "loss": loss * math.exp(u + rng.normal(0.0, NOISE[noise] / 5)),
                }
            )
    return pd.DataFrame(rows)


def _holdout(case: str, world: str, noise: str, seed: int) -> dict:
    """Per held-out point: "inside: NO" (outside its 95% prediction interval) said?  yes: the share of
    points (``dw fit --holdout largest``, defaults)."""
    from depthwidth.fit.holdout import holdout
    from depthwidth.fit.laws import get_law

    h = holdout(hold_table(world, noise, seed), get_law("chinchilla"), seed=seed)
    out = [not p["inside"] for p in h["points"]]
    return {"yes": sum(out) / len(out), "wrong": 0.0, "points": len(out)}


# -- isoFLOP agreement: fit/isoflop.py compare_approaches ("agree" / "DISAGREE") --------------

ISO_BUDGETS = (1e18, 3e18, 1e19, 3e19, 1e20)
ISO_SIZES = {7: range(-3, 4), 4: (-3, -1, 1, 3)}  # log2 of N / N*(C): 7 sizes (a skewed cubic), or 4 (a parabola)


def iso_table(world: str, sizes: int, noise: str, seed: int):
    """Five isoFLOP budgets, ``sizes`` sizes each (N*(C)·2^k, ISO_SIZES, T = C/6N), one run a size: Chinchilla
    (Hoffmann's fit: the approaches must agree) or with alpha falling with N (``curved``: 0.34 at
    1e8 parameters, 0.01 less per e-fold, which a constant-exponent law cannot follow); each
    budget's sizes centred on its true optimum."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    a, b = 0.34, 0.28
    A, B, E = 406.4, 410.7, 1.69

    def true(n, c):
        al = a if world == "law" else a - 0.01 * np.log(n / 1e8)
        return E + A / n**al + B / (c / (6 * n)) ** b

    rows = []
    for c in ISO_BUDGETS:
        grid = np.geomspace(1e6, 1e12, 4001)
        nstar = float(grid[np.argmin(true(grid, c))])  # the profile's own minimum: the sizes centred on it
        for k in ISO_SIZES[sizes]:
            n = nstar * 2.0**k
            t = c / (6 * n)
            loss = float(true(n, c)) * math.exp(rng.normal(0.0, NOISE[noise]))
            rows.append({"run": f"c{c:.0e}k{k}", "params": n, "tokens": t, "loss": loss, "budget": c})
    return pd.DataFrame(rows)


def _isoflop(case: str, world: str, sizes: int, noise: str, seed: int) -> dict:
    """ "DISAGREE" said of N* ∝ C^a (approach 2 vs the fitted law, ``dw fit --approach isoflop``)?"""
    from depthwidth.fit.pipeline import run_fit

    res = run_fit(
        runs=iso_table(world, sizes, noise, seed), law="chinchilla", approach="isoflop", write=False, seed=seed
    )
    rows = (res.get("isoflop") or {}).get("comparison") or []
    said = [r["agree"] for r in rows]
    return {"yes": any(x is False for x in said), "wrong": False, "agree": said}


# -- width-depth's claim: fit/verdicts.py _exponent_claim ("a_w and a_d identified") ----------

WD_WIDTHS = (128, 256, 512, 1024)
WD_DEPTHS = (2, 4, 8, 16, 32)


def wd_table(world: str, noise: str, seed: int):
    """20 runs (4 widths x 5 depths), 2 budgets each, from E + A_w/W^0.5 + A_d/D^a_d + B/T^0.35 with
    a_d = 0.6 (``both``) or 0 (``ad0``: loss does not depend on depth; A_d/D^0 is a constant)."""

    a_d = 0.6 if world == "both" else 0.0

    def loss(d, w, t):
        return 1.8 + 25.0 / w**0.5 + 1.2 / d**a_d + 2000.0 / t**0.35

    return depth_width_table(WD_WIDTHS, WD_DEPTHS, 1e9, loss, noise, seed)


def _wd_exponent(case: str, world: str, noise: str, seed: int) -> dict:
    """ "a_w and a_d identified: yes" said (dw fit --law width-depth)?"""
    from depthwidth.fit.pipeline import run_fit

    res = run_fit(runs=wd_table(world, noise, seed), law="width-depth", write=False, seed=seed)
    claim = (res.get("identification") or {}).get("claim") or {}
    return {"yes": bool(claim.get("identified")), "wrong": False, "ci": {k: res["ci"].get(k) for k in ("a_w", "a_d")}}


# -- the registry (bench_verdicts.py merges it into its own) ----------------------------------

# kind: (label, run(case, *spec, seed) -> {yes, wrong, ...}, truth(spec) -> whether the planted answer is yes)
VERDICTS = {
    "lr_dep": ("lr* falls/rises with X", _lr_dep, lambda spec: LR_WORLDS[spec[0]][spec[1]] != 0.0),
    "lr_flat": ("lr* is flat in X", _lr_flat, lambda spec: LR_WORLDS[spec[0]][spec[1]] == 0.0),
    "inside": ("inside claim supported", _inside, _inside_truth),
    "ushape": ("a U-shape (report)", _ushape, lambda spec: spec[0] == "u"),
    "wmono": ("width NOT monotone (report)", _wmono, lambda spec: spec[0] == "wide"),
    "pairs": ("pair winner (report)", _pairs, lambda spec: spec[0] == "deep"),
    "forecast": ("status FLAG", _forecast, lambda spec: spec[0] == "bad"),
    "match": ("× FLOPs ≠ uniform (CI)", _match, lambda spec: spec[0] == "x08"),
    "compare": ("held-out comparison prefers X", _compare, lambda spec: spec[0] == "wd"),
    "dcrit_form": ("D_crit form preferred", _dcrit_form, lambda spec: spec[0] in ("log", "power")),
    "tuning": ("claim CHANGES with tuning", _tuning, lambda spec: spec[0] == "slope"),
    "holdout": ("held-out point outside PI", _holdout, lambda spec: spec[0] == "bend"),
    "isoflop": ("isoFLOP DISAGREE", _isoflop, lambda spec: False),
    "wd_exponent": ("a_w and a_d identified", _wd_exponent, lambda spec: spec[0] == "both"),
}


def cases() -> dict:
    """{case name: (kind, *spec)} of the kinds above."""
    out = {}
    for world in LR_WORLDS:
        for var in ("width", "depth"):
            for noise in NOISE:
                out[f"lr-dep-{world}-{var}-{noise}"] = ("lr_dep", world, var, noise)
                out[f"lr-flat-{world}-{var}-{noise}"] = ("lr_flat", world, var, noise)
    for claim in INSIDE_CLAIMS:
        for world in ("same", "paper") + (("novalley",) if claim == "valley" else ()):
            for seeds in (1, 3):
                out[f"inside-{claim}-{world}-{seeds}seed"] = ("inside", claim, world, seeds)
    for kind, worlds in (("ushape", ("flat", "u")), ("wmono", ("flat", "wide")), ("pairs", ("nshape", "deep"))):
        for world in worlds:
            for noise in NOISE:
                for seeds in (1, 3):
                    out[f"{kind}-{world}-{noise}-{seeds}seed"] = (kind, world, noise, seeds)
    for world in ("healthy", "bad"):
        for at in (0.3, 0.6):
            for noise in NOISE:
                out[f"forecast-{world}-{int(100 * at)}pct-{noise}"] = ("forecast", world, at, noise)
    for world in ("same", "x08"):
        for sizes, seeds in ((4, 1), (6, 1), (6, 2)):
            for noise in NOISE:
                out[f"match-{world}-{sizes}x{seeds}-{noise}"] = ("match", world, sizes, seeds, noise)
    for noise in NOISE:
        for world in CMP_WORLDS:
            out[f"compare-{world}-{noise}"] = ("compare", world, noise)
            if world != "wd":  # no D_crit form is right or wrong there
                out[f"dcrit-form-{world}-{noise}"] = ("dcrit_form", world, noise)
        for kind, worlds in (
            ("tuning", ("flat", "slope")),
            ("holdout", ("law", "bend")),
            ("wd_exponent", ("both", "ad0")),
        ):
            for world in worlds:
                out[f"{kind.replace('_', '-')}-{world}-{noise}"] = (kind, world, noise)
        for sizes in ISO_SIZES:
            out[f"isoflop-law-{sizes}sizes-{noise}"] = ("isoflop", "law", sizes, noise)
    return out
