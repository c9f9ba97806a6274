"""``dw simulate``'s library: ``simulate`` plans a sweep file as ``dw sweep --dry-run`` does (no data,
no torch), gives every run its planted losses at its token budgets and writes the store
(simulate/store.py); ``truth`` is the planted value of every number ``dw fit`` reports.  What a
planted world is for, and how it is used: the package's docstring (simulate/__init__.py).

Milliseconds per run: the 30-run depth_delusion grid is written in well
under a second (benchmarks/bench_calibration.py times it).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from depthwidth.core import provenance
from depthwidth.core.errors import BadInput, bad
from depthwidth.core.store import check_name, runs_root
from depthwidth.fit.derived import count_model, n_column, with_convention
from depthwidth.fit.derived import C_REF, derived_numbers
from depthwidth.fit.laws import parse_values
from depthwidth.model.accounting import account
from depthwidth.model.resolve import from_config
from depthwidth.simulate.store import WORLD_FILE, WORLD_SCHEMA, check_target, run_record, write_store
from depthwidth.simulate.world import LR_KEY, LrWorld, Noise, World, check_lr, gradient_profile, losses, world
from depthwidth.sweep import plan
from depthwidth.sweep.file import available
from depthwidth.train.plan import check as check_run

__all__ = ["simulate", "world", "Noise", "World", "WORLD_FILE", "parse_budgets", "truth"]


def parse_budgets(spec) -> tuple[float, ...] | None:
    """``sweep`` (None: each run's own budgets) or fractions of each run's tokens, e.g. "0.25,0.5,1"."""
    if spec is None or spec == "sweep":
        return None
    parts = spec if isinstance(spec, (list, tuple)) else str(spec).split(",")
    try:
        fr = sorted({float(x) for x in parts if str(x).strip()})
    except ValueError:
        raise bad("--budgets", spec, "sweep, or fractions of each run's tokens in (0, 1], e.g. 0.25,0.5,1") from None
    if not fr or not all(0 < f <= 1 for f in fr):
        raise bad("--budgets", spec, "sweep, or fractions of each run's tokens in (0, 1], e.g. 0.25,0.5,1")
    return tuple(fr)


def truth(w: World, table, widths, c_ref: float = C_REF) -> dict:
    """The planted value of every number dw fit reports: parameters and derived numbers (flat keys)."""
    tab, _ = with_convention(table, w.convention)
    count = count_model(tab, w.convention)
    out = dict(w.values)
    out.update({k: float(v[0]) for k, v in derived_numbers(w.law, w.values, widths, c_ref, count).items()})
    return {k: (v if math.isfinite(v) else None) for k, v in out.items()}


SCALES = ("A", "B", "gamma", "E", "A_w", "A_d")  # the coefficients of a law's additive terms
HEADROOM = 0.9  # the default world's largest planted loss, as a share of ln V


def _plausible(w, L: np.ndarray, rows: dict, runs, set_values):
    """(world, losses, scaled): no planted loss above ln V, the loss of a uniform guess over the runs'
    vocabulary.  A world whose losses exceed it is scaled -- every additive term's coefficient
    (``SCALES``) that ``--set`` did not give, by one factor, so its exponents and D_crit are the
    papers' or the ones set -- until its largest loss is ``HEADROOM``·ln V (the published
    parameters, fitted at a 50k vocabulary and 27M–7B parameters, give 9–12 nats on a CPU-sized
    byte-level sweep; ``--set kappa=4`` on such a sweep is scaled as the default world is).  Every
    additive term is linear in its coefficient, so the clean loss is S + f·U (S from the terms set,
    U from the rest) times each point's noise and lr factors.  Bad input only where the terms set
    by hand exceed it by themselves."""
    vocab = max(int(r.cfg.model.vocab_size) for r in runs)
    ln_v = math.log(vocab)
    top = float(np.max(L)) if len(L) else 0.0
    if top <= ln_v:
        return w, L, None
    given = set(parse_values(set_values, w.law, "--set")) if set_values else set()
    free = [k for k in w.values if k in SCALES and k not in given]
    if len(free) == len([k for k in w.values if k in SCALES]):  # every term scales: the whole loss does
        f = HEADROOM * ln_v / top
        values = {k: (v * f if k in SCALES else v) for k, v in w.values.items()}
        return replace(w, values=values), L * f, {"factor": f, "vocab": vocab, "why": _why(top, ln_v, vocab, f, given)}
    at = {**rows, "loss": np.ones(len(L))}
    clean = w.law.predict(w.values, at)
    half = w.law.predict({**w.values, **{k: v / 2 for k, v in w.values.items() if k in given and k in SCALES}}, at)
    S = 2 * (clean - half)  # the terms set: linear in their coefficients, so halving them halves S
    U, m = clean - S, L / clean  # m: each point's noise (and lr) factor
    cap = HEADROOM * ln_v
    U = np.where(U > 1e-9 * clean, U, 0.0)  # halving's rounding (~1e-14) is no term: a free term that acts nowhere
    act = U * m > 0
    f = float(min([1.0, *((cap - S * m)[act] / (U * m)[act])])) if act.any() else 1.0
    L2 = (S + max(f, 0.0) * U) * m
    if f <= 0 or float(np.max(L2)) > cap * (1 + 1e-9):
        shown = ",".join(set_values) if isinstance(set_values, (list, tuple)) else set_values
        raise BadInput(
            f"bad value for --set: {shown} (allowed: values whose planted losses stay below {cap:.3g} nats, "
            f"0.9·ln V for the sweep's {vocab}-token vocabulary, with the terms --set did not give scaled "
            f"down; the terms set give up to {float(np.max(S * m)):.3g} by themselves)"
        )
    values = {k: (v * f if k in free else v) for k, v in w.values.items()}
    why = _why(top, ln_v, vocab, f, given, free)
    return replace(w, values=values), L2, {"factor": f, "vocab": vocab, "why": why}


def _why(top: float, ln_v: float, vocab: int, f: float, given: set, free: list | None = None) -> str:
    what = f"every term --set left ({', '.join(free)})" if free is not None else "every term"
    return (
        f"the {'published ' if not given else ''}parameters plant losses up to {top:.3g} nats, above ln V = "
        f"{ln_v:.3g} for this sweep's {vocab}-token vocabulary: {what} scaled by {f:.3g} (exponents and D_crit "
        "unchanged)"
    )


def _lr_world(runs, accs, curvature: float, exponent: float):
    """(LrWorld, per-run loss factor, {group: planted lr*}) of a sweep that tunes optim.lr
    (simulate/world.py); (None, None, {}) for any other, whose losses are left as they are."""
    tuned = [i for i, r in enumerate(runs) if r.group and LR_KEY in r.tuned]
    if not tuned:
        return None, None, {}
    lrs = np.array([float(runs[i].tuned[LR_KEY]) for i in tuned])
    ns = np.array([float(accs[i]["params"]) for i in tuned])
    lw = LrWorld.of(lrs, ns, curvature, exponent)
    factor = np.ones(len(runs))
    factor[tuned] = lw.factor(lrs, ns)
    return lw, factor, {runs[i].group: float(lw.optimum(n)) for i, n in zip(tuned, ns)}


def simulate(
    sweep: str,
    overrides=(),
    *,
    name: str | None = None,
    root=None,
    law: str = "depth-delusion",
    dcrit: str = "log",
    irreducible: bool = False,
    set_values=None,
    n_convention: str | None = None,
    noise: Noise | None = None,
    budgets="sweep",
    seed: int = 0,
    replace: bool = False,
    c_ref: float = C_REF,
    only: str | None = None,
    lr_curvature: float = 0.04,
    lr_exponent: float = 0.25,
) -> dict:
    """Write the planted store of sweep file ``sweep`` to ROOT/NAME (default ``SWEEP-sim``); its summary."""
    import pandas as pd

    t0 = time.perf_counter()
    w = world(law, dcrit=dcrit, irreducible=irreducible, set_values=set_values, n_convention=n_convention, noise=noise)
    fractions = parse_budgets(budgets)
    check_lr(lr_curvature, lr_exponent)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise bad("--seed", seed, "an integer >= 0")
    name = check_name(name or f"{sweep}-sim", "--name")
    if name in available():
        raise bad(
            "--name",
            name,
            f"a name that is no sweep file's (dw sweep {name} would take its planted runs for trained ones)",
        )
    target = runs_root(root) / name
    check_target(target, replace)
    planned = plan(sweep, list(overrides), only=only)

    rows, idx, pts, accs = [], [], [], []
    for i, r in enumerate(planned.runs):
        acc = account(from_config(r.cfg.model), int(r.cfg.train.seq_len))
        f = r.figures
        if fractions is None:
            pts_r = [(b.tokens, b.steps) for b in check_run(r.cfg).budgets]
        else:
            pts_r = sorted({(int(round(x * f["tokens"])), max(1, int(round(x * f["steps"])))) for x in fractions})
        N = float(
            n_column(
                {
                    "params": acc["params"],
                    "params_non_embedding": acc["params_non_embedding"],
                    "depth": f["depth"],
                    "width": f["width"],
                },
                w.convention,
            )
        )
        for tok, _ in pts_r:
            rows.append(
                {
                    "run": r.run_id,
                    "params": N,
                    "tokens": float(tok),
                    "depth": float(f["depth"]),
                    "width": float(f["width"]),
                }
            )
            idx.append(i)
        pts.append(pts_r)
        accs.append(acc)
    table = pd.DataFrame(rows)
    idx = np.asarray(idx)
    cols = {c: table[c].to_numpy() for c in ("params", "tokens", "depth", "width")}
    L = losses(w, cols, idx, seed)
    lr_w, lr_factor, optima = _lr_world(planned.runs, accs, lr_curvature, lr_exponent)
    if lr_w is not None:  # a tuned sweep: the loss rises away from each group's planted lr*
        L = L * lr_factor[idx]
    w, L, scaled = _plausible(w, L, cols, planned.runs, set_values)
    rng = np.random.default_rng([seed, 1])
    tuning = {} if lr_w is None else {"tuning": lr_w.to_dict()}
    world_prov = {"simulated": True, "world": {**w.to_dict(), **tuning, "seed": seed, "sweep": sweep}}
    recs = []
    for i, r in enumerate(planned.runs):
        prof = gradient_profile(w, int(r.figures["depth"]), float(r.figures["width"]), rng)
        recs.append(run_record(r, name, target, accs[i], pts[i], L[idx == i], world_prov, prof))
    uniform = [a for a, r in zip(accs, planned.runs) if r.figures["shape"] == "uniform"] or accs
    tab = pd.DataFrame(
        [
            {
                "run": str(k),
                "depth": a["depth"],
                "width": a["widths"][0],
                "params": a["params"],
                "params_non_embedding": a["params_non_embedding"],
            }
            for k, a in enumerate(uniform)
        ]
    )
    widths = sorted({int(r.figures["width"]) for r in planned.runs})
    planted = truth(w, tab, widths, c_ref)
    doc = {
        "schema": WORLD_SCHEMA,
        "sweep": sweep,
        "name": name,
        "overrides": list(overrides),
        "seed": seed,
        "world": w.to_dict(),
        "budgets": "sweep" if fractions is None else list(fractions),
        "c_ref": c_ref,
        "runs": len(recs),
        "points": int(len(table)),
        "truth": planted,
        "scaled": scaled,
        **({"tuning": {**lr_w.to_dict(), "optima": optima}} if lr_w is not None else {}),
        "provenance": provenance.record(),
    }
    write_store(target, name, recs, doc)
    return {**doc, "dir": str(target), "seconds": round(time.perf_counter() - t0, 3)}
