"""Uncertainty for a fit: run-level bootstrap and a seed-noise bootstrap.

``--bootstrap N`` resamples whole runs with replacement (every token-budget
point of a drawn run comes with it, never single checkpoints) and refits from
a small start grid: the optimum, the next-best optima of the full search and a
few points of the law's grid.  All replicates x starts run as one batched
problem with per-replicate point weights (the multiplicity of each run).

Where several runs share a configuration and differ only in seed, a second
bootstrap resamples seeds *within* each configuration: the design stays fixed
and only seed-to-seed noise moves the fit.

Intervals are percentile intervals over the replicates that converged (the
solver's own convergence flag for the replicate's best start).
"""

from __future__ import annotations

import numpy as np

from depthwidth.fit.solver import FitResult, Problem, batched_lm, best_starts

CONFIG_KEYS = ("params", "depth", "width", "shape")
_BLOCK = 64  # replicates per batched call


def run_codes(table) -> tuple[np.ndarray, int]:
    import pandas as pd

    codes, uniq = pd.factorize(pd.Series(np.asarray(table["run"])).astype(str))
    return codes.astype(int), len(uniq)


def run_weights(codes: np.ndarray, n_runs: int, B: int, rng) -> np.ndarray:
    """(B, n) point weights: each replicate draws n_runs runs with replacement."""
    draws = rng.integers(0, n_runs, size=(B, n_runs))
    counts = np.stack([np.bincount(d, minlength=n_runs) for d in draws])
    return counts[:, codes].astype(float)


def seed_groups(table) -> list[np.ndarray] | None:
    """Run codes grouped by configuration (all run-level columns but seed); None without replicated seeds."""
    import pandas as pd

    if "seed" not in table or table["seed"].isna().all():
        return None
    codes, n_runs = run_codes(table)
    keys = [k for k in CONFIG_KEYS if k in table]
    df = pd.DataFrame({k: table[k] for k in keys})
    df["_code"] = codes
    per_run = df.drop_duplicates("_code")
    groups = []
    for _, g in per_run.groupby(keys, dropna=False) if keys else [(None, per_run)]:
        groups.append(g["_code"].to_numpy())
    if not any(len(g) > 1 for g in groups):
        return None
    return groups


def seed_weights(codes: np.ndarray, n_runs: int, groups: list[np.ndarray], B: int, rng) -> np.ndarray:
    counts = np.zeros((B, n_runs))
    for g in groups:
        draws = rng.integers(0, len(g), size=(B, len(g)))
        for b in range(B):
            np.add.at(counts[b], g[draws[b]], 1.0)
    return counts[:, codes]


def refit_many(fr: FitResult, table, weights: np.ndarray, starts: np.ndarray | None = None,
               max_iter: int = 500) -> dict:
    """Refit ``fr.law`` under each row of ``weights`` (R, n); returns theta (R, P), F, ok."""
    law = fr.law
    y = np.log(np.asarray(table["loss"], dtype=float))
    pb = Problem(law, law.data(table), y, fr.delta, fr.pins)
    st = pb.reduce(best_starts(fr, law) if starts is None else starts)
    S0, R = len(st), len(weights)
    theta = np.full((R, len(law.params)), np.nan)
    F = np.full(R, np.inf)
    ok = np.zeros(R, dtype=bool)
    for a in range(0, R, _BLOCK):
        w = weights[a:a + _BLOCK]
        r = len(w)
        res = batched_lm(pb, np.tile(st, (r, 1)), weights=np.repeat(w, S0, axis=0), max_iter=max_iter,
                         xtol=1e-7, ftol=1e-10)
        Fr = res["F"].reshape(r, S0)
        best = np.argmin(Fr, axis=1)
        tb = res["theta"].reshape(r, S0, -1)[np.arange(r), best]
        theta[a:a + r] = pb.full(tb)
        F[a:a + r] = Fr[np.arange(r), best]
        ok[a:a + r] = res["converged"].reshape(r, S0)[np.arange(r), best]
    # A replicate counts only if the solver says its best start converged: a finite
    # objective after max_iter iterations is just where the solver stopped.
    ok &= np.isfinite(F)
    theta[~ok] = np.nan
    return {"theta": theta, "F": F, "ok": ok}


def bootstrap(fr: FitResult, table, B: int, seed: int = 0, kind: str = "runs") -> dict | None:
    """``kind='runs'`` resamples runs; ``kind='seeds'`` resamples seeds within configurations."""
    rng = np.random.default_rng(seed)
    codes, n_runs = run_codes(table)
    if kind == "runs":
        W = run_weights(codes, n_runs, B, rng)
    else:
        groups = seed_groups(table)
        if groups is None:
            return None
        W = seed_weights(codes, n_runs, groups, B, rng)
    out = refit_many(fr, table, W)
    out["kind"] = kind
    out["B"] = B
    out["n_runs"] = n_runs
    return out


def percentile_ci(samples: np.ndarray, level: float) -> list[float] | None:
    s = np.asarray(samples, dtype=float)
    s = s[np.isfinite(s)]
    if len(s) < 2:
        return None
    lo, hi = np.percentile(s, [50 * (1 - level), 50 * (1 + level)])
    return [float(lo), float(hi)]


def param_samples(fr: FitResult, boot: dict) -> dict[str, np.ndarray]:
    ok = boot["ok"]
    nat = fr.law.natural_batch(boot["theta"][ok]) if ok.any() else {p.name: np.array([]) for p in fr.law.params}
    return {k: np.asarray(v, dtype=float) for k, v in nat.items()}


def bound_hits(fr: FitResult, boot: dict) -> dict[str, float]:
    """Fraction of converged replicates with each free parameter on a bound."""
    law, ok = fr.law, boot["ok"]
    if not ok.any():
        return {}
    th = boot["theta"][ok]
    span = law.hi - law.lo
    out = {}
    for i, p in enumerate(law.params):
        if p.name in fr.pins:
            continue
        hit = (th[:, i] - p.lo <= 1e-6 * span[i]) | (p.hi - th[:, i] <= 1e-6 * span[i])
        if hit.mean() > 0:
            out[p.name] = float(hit.mean())
    return out
