"""Designs spent in checkpoints, from the first run: what ``dw suggest``'s rounds and
benchmarks/bench_scalebench.py do when a budget is a sequence of checkpoints (1%, 5%, 10% of a pool).

``initial_runs``: the cheapest runs a design starts from (up to ``int(2.5·P)`` for a law of P
parameters, as the V-optimal and MSPE designs of ScaleBench start; ``int(2.5·P / m)`` for a law
whose run measures m outputs: 2.5 points a parameter either way), never more than
``INITIAL_SHARE`` of a checkpoint's budget: on a pool whose cheapest 2.5·P runs cost more than a
checkpoint, the seed would otherwise be the whole design there.

``rml_ensemble``: an ensemble for a table with fewer runs than the law has parameters (or none),
where a bootstrap of the fit has nothing to resample.  Randomized maximum likelihood: each replicate
starts at a draw from the law's own start grid (its stated plausible values, the prior) and is fitted
by Levenberg-Marquardt to the losses plus a fresh draw of their noise (``FEW_NOISE``).  The runs pin
the directions they determine; in the directions they do not, a replicate stays near its prior draw
(LM's damped steps move along the data's gradient only), so the replicates' spread there is the
prior's.  With no runs it is the prior.  A multi-output law's table (a column per output, or the long
form) is fitted in its long form, every output of every run (fit/userlaw.long_table).

``round_ensemble``: the fit's bootstrap ensemble (``dw fit``'s pipeline) where the table has at least
as many runs as parameters and it holds ``MIN_REPLICATES`` converged replicates, else the RML
ensemble; why the bootstrap was not used is said in one line naming the Python argument.

``checkpoint_design``: per checkpoint, the initial runs, then rounds of ensemble -> greedy batch
(``fit/predict.design``) until nothing affordable is left; every batch is within the checkpoint's
budget.  A round whose ensemble cannot be formed takes the batch's cheapest affordable runs and is
counted, with its reason, in ``stats``.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from depthwidth.core.errors import BadInput, WorkFailed, as_arguments
from depthwidth.fit.laws import Law
from depthwidth.fit.predict import MIN_REPLICATES, Ensemble, design

INITIAL_SHARE = 0.5  # the cheapest-runs seed takes at most this share of any checkpoint's budget
INITIAL_PER_PARAM = 2.5  # the seed's size, runs per parameter of the law (ScaleBench's cheap_init)
FEW_NOISE = 0.02  # log loss: a new run's noise assumed where too few runs measure it (a law's typical misfit)
RML_REPLICATES = 200
REFIT_GROWTH = 0.5  # picks per round: this fraction of the runs in (geometric rounds)
MULTI_SHARED = 0.5  # a multi-output law's RML ensemble: the share of a new run's noise variance its outputs share


class DesignFailed(Exception):
    """A round's ensemble could not be formed; the message is one line saying why."""


def initial_runs(
    cost,
    limit: float,
    n_params: int,
    taken=None,
    seeded=None,
    share: float = INITIAL_SHARE,
    outputs: int = 1,
) -> list[int]:
    """The cheapest runs not yet ``taken``, in order of cost, up to 2.5 measured points per parameter
    (``int(2.5·n_params / outputs)`` initial runs, a run of a law of several outputs measuring
    ``outputs`` points) in all and ``share`` of ``limit`` (the checkpoint's budget) for them in all,
    counting those of earlier checkpoints (``seeded``; default: every run ``taken``): the initial
    design never takes more than that share of a checkpoint, whatever the pool's costs."""
    cost = np.asarray(cost, dtype=float)
    taken = np.zeros(len(cost), dtype=bool) if taken is None else np.asarray(taken, dtype=bool)
    seeded = list(np.flatnonzero(taken)) if seeded is None else list(seeded)
    if outputs < 1:
        raise BadInput(f"bad value for outputs: {outputs!r} (allowed: the points one run measures, at least 1)")
    n_max = max(1, int(INITIAL_PER_PARAM * n_params / outputs))
    n, spent = len(seeded), float(cost[seeded].sum()) if seeded else 0.0
    out = []
    for i in np.argsort(cost, kind="stable"):
        if n >= n_max:
            break
        if taken[i]:
            continue
        if spent + cost[i] > share * limit * (1 + 1e-12):
            break
        out.append(int(i))
        n += 1
        spent += cost[i]
    return out


def rml_ensemble(
    law: Law,
    table=None,
    B: int = RML_REPLICATES,
    seed: int = 0,
    noise: float = FEW_NOISE,
    convention: str | None = None,
) -> Ensemble:
    """Randomized maximum likelihood (module doc): ``B`` replicates, each from a draw of the law's
    start grid fitted to the losses of ``table`` plus fresh noise of sd ``noise`` (log loss).
    ``convention``: the parameter count the law reads as N (fit/derived.py; default the law's).

    A multi-output law's runs are fitted with all their outputs (``long_table``); a new run's noise
    ``noise`` is then split evenly between the run's own effect, which its outputs share, and each
    output's own (``MULTI_SHARED``): where too few runs measure the split, neither extreme (outputs
    that move together, or apart) is assumed."""
    from depthwidth.fit.derived import default_convention, with_convention
    from depthwidth.fit.engine import Problem, batched_lm, fitted_target
    from depthwidth.fit.userlaw import long_table, outputs

    multi = bool(outputs(law))
    if multi and table is not None:
        import pandas as pd

        wide = pd.DataFrame(table)  # one row per run and output, a run's outputs together (none: the prior)
        table = long_table(wide, law) if len(wide) else None
    convention = convention or default_convention(law.name)
    if table is not None and len(table["loss"]) and ("params" in law.columns or convention == "12DW2"):
        import pandas as pd

        table, _ = with_convention(pd.DataFrame(table).reset_index(drop=True), convention)

    rng = np.random.default_rng(seed)
    grid = law.grid(max_starts=B, seed=seed)
    starts = grid[rng.integers(0, len(grid), B)] if len(grid) < B else grid
    starts = np.clip(starts, law.lo, law.hi)
    nz = {"run": float(noise), "point": 0.0, "df_run": 1000, "df_point": 1000}
    if multi:
        nz.update(run=float(noise) * math.sqrt(MULTI_SHARED), point=float(noise) * math.sqrt(1 - MULTI_SHARED))
    n = 0 if table is None else len(table["loss"])
    if n == 0:
        centre = np.median(starts, axis=0)
        return Ensemble(law, centre, starts, nz, convention=convention, source="prior (the law's start grid)")
    y = fitted_target(table, law)
    pb = Problem(law, law.data(table), y)
    ys = y[None, :] + rng.normal(0.0, noise, (B, n))
    with np.errstate(all="ignore"):
        res = batched_lm(pb, pb.reduce(starts), ys=ys, max_iter=200)
        theta = pb.full(res["theta"])
        ok = np.isfinite(res["F"]) & np.isfinite(theta).all(axis=1)
        F = pb.objective(pb.reduce(theta[ok])) if ok.any() else np.array([])
    if ok.sum() < MIN_REPLICATES:
        raise DesignFailed(
            f"rml_ensemble: {int(ok.sum())} of B={B} replicates fitted {n} runs of {law.name} "
            f"(a design needs {MIN_REPLICATES}; raise B)"
        )
    theta = theta[ok]
    runs = [dict(r) for r in (table.to_dict("records") if hasattr(table, "to_dict") else table)]
    return Ensemble(
        law,
        theta[int(np.argmin(F))],
        theta,
        nz,
        convention=convention,
        source=f"rml ({len(set(table['run'])) if multi else n} runs)",
        runs=runs,
    )


def round_ensemble(
    law: Law, table, *, law_spec=None, bootstrap: int = 50, max_starts: int = 64, seed: int = 0
) -> tuple[Ensemble, str | None]:
    """(ensemble, why the fit's bootstrap was not used or None).  ``law_spec``: what ``run_fit``
    takes as ``law`` (a built-in law's name, a user law's file or mapping; default ``law.name``).
    A multi-output law's ``table`` gives a run's outputs side by side (or in the long form): both
    fits use every output of every run, and ``n`` counts its points (runs × outputs) as dw fit does."""
    from depthwidth.fit.userlaw import long_table, outputs

    if outputs(law) and table is not None:
        import pandas as pd

        wide = pd.DataFrame(table)
        table = long_table(wide, law) if len(wide) else None
    n, P = len(table["loss"]) if table is not None else 0, len(law.params)
    why = None
    if n < P:
        why = f"{n} runs, fewer than the {P} parameters of {law.name}: run_fit refuses (rml_ensemble instead)"
    else:
        from depthwidth.fit.pipeline import run_fit
        from depthwidth.fit.predict import ensemble_of

        try:
            doc = run_fit(
                runs=table, law=law_spec or law.name, bootstrap=bootstrap, max_starts=max_starts, seed=seed, write=False
            )
            n_ok = len((doc.get("replicates") or {}).get("theta") or [])
            ens = ensemble_of(doc) if n_ok else None
            if ens is not None and n_ok >= MIN_REPLICATES:
                return ens, None
            why = (
                f"run_fit(bootstrap={bootstrap}) left {n_ok} converged replicates, a design needs "
                f"{MIN_REPLICATES} (raise bootstrap=; rml_ensemble instead)"
            )
        except (BadInput, WorkFailed) as e:
            why = f"run_fit failed ({as_arguments(str(e).splitlines()[0], 'run_fit')[:120]}; rml_ensemble instead)"
    return rml_ensemble(law, table, seed=seed), why


def checkpoint_design(
    rows,
    cost,
    limits,
    target,
    n_params: int,
    ensemble: Callable[[list[int]], Ensemble],
    *,
    growth: float = REFIT_GROWTH,
    share: float = INITIAL_SHARE,
    outputs: int = 1,
    stats: dict | None = None,
    weigh: Callable[[list[int], Ensemble], np.ndarray | None] | None = None,
    **design_kw,
) -> list[np.ndarray]:
    """The runs a design picks among ``rows`` (a DataFrame of the law's columns) of ``cost``, one
    cumulative index array per checkpoint budget of ``limits`` (increasing, in cost units).
    ``outputs``: the points one run measures (a law of several outputs: ``len(userlaw.outputs(law))``),
    which the initial design's size counts (``initial_runs``).

    ``ensemble(order)``: the ensemble from the runs ``order`` picked so far (``round_ensemble``);
    DesignFailed, BadInput or WorkFailed from it, or a design with no pick, makes the round take the
    batch's cheapest affordable runs, counted in ``stats['fallbacks']`` with the reason in
    ``stats['fallback_reasons']``.  ``weigh(order, ensemble)``: the weight the fit of those runs will
    give each of ``rows`` (``fit/target_fit.locality``'s ``extra_weights``), or None (unweighted);
    the rounds it weighs are counted in ``stats['weighted_rounds']``.  ``design_kw`` go to
    ``fit/predict.design``."""
    cost = np.asarray(cost, dtype=float)
    stats = {} if stats is None else stats
    stats.setdefault("fallbacks", 0)
    stats.setdefault("fallback_reasons", {})
    stats.setdefault("rounds", 0)
    stats.setdefault("initial_spent", [])
    stats.setdefault("weighted_rounds", 0)
    taken = np.zeros(len(cost), dtype=bool)
    order: list[int] = []
    seeded: list[int] = []  # the initial runs, over every checkpoint
    spent, out = 0.0, []
    for limit in limits:
        seed_runs = initial_runs(cost, limit, n_params, taken, seeded, share, outputs)
        for i in seed_runs:
            taken[i] = True
            order.append(i)
            seeded.append(i)
            spent += cost[i]
        stats["initial_spent"].append(float(cost[seeded].sum()) / limit if limit > 0 else 0.0)
        while True:
            free = np.flatnonzero(~taken & (cost <= (limit - spent) * (1 + 1e-12)))
            if not len(free):
                break
            k = max(1, math.ceil(growth * len(order)))
            picks, why, wf = None, None, None
            try:
                ens = ensemble(list(order))
                w = weigh(list(order), ens) if weigh is not None else None
                wf = None if w is None else np.asarray(w, dtype=float)[free]
                d = design(ens, target, rows.iloc[free], cost[free], budget=limit - spent, k=k, weights=wf, **design_kw)
                picks = [int(free[j]) for j in d.picks]
                stats["weighted_rounds"] += int(w is not None)  # a round the weights valued: one that designed
                why = None if picks else "design(): no affordable candidate with a finite value"
            except (DesignFailed, BadInput, WorkFailed, np.linalg.LinAlgError) as e:
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
            stats["rounds"] += 1
            if not picks:
                stats["fallbacks"] += 1
                stats["fallback_reasons"][why] = stats["fallback_reasons"].get(why, 0) + 1
                # the cheapest runs the fit would use: a weight-0 run is what the weights ruled out
                pool = free if wf is None or not (wf > 0).any() else free[wf > 0]
                picks = [int(i) for i in pool[np.argsort(cost[pool], kind="stable")[:k]]]
            for i in picks:  # within the checkpoint's budget, always
                if spent + cost[i] > limit * (1 + 1e-12):
                    break
                taken[i] = True
                order.append(i)
                spent += cost[i]
        out.append(np.array(order, dtype=int))
    return out
