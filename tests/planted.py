"""Planted run tables: losses generated from a law with known parameters.

Used by the tests (parameter recovery, interval coverage) and by
``benchmarks/bench_fit.py``.  Every run has several token budgets (rows) and
a seed; multiplicative log-normal noise of ``noise`` (σ of log loss) is drawn
per row (``run_noise``: an extra per-run offset, shared by a run's rows).
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.fit.laws import Law

PLANTED = {
    "chinchilla": {"E": 1.82, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658},
    "depth-delusion[log]": {
        "A": 400.0,
        "alpha": 0.30,
        "B": 2000.0,
        "delta": 0.35,
        "gamma": 1.0,
        "mu": 0.3,
        "kappa": 2.43,
    },
    "depth-delusion[power]": {
        "A": 400.0,
        "alpha": 0.30,
        "B": 2000.0,
        "delta": 0.35,
        "gamma": 1.0,
        "mu": 0.3,
        "c": 0.5,
        "p": 0.44,
    },
    "width-depth": {"E": 1.7, "A_w": 30.0, "a_w": 0.5, "A_d": 2.0, "a_d": 0.6, "B": 900.0, "beta": 0.3},
}


def design(kind: str = "shapes", seeds: int = 1, budgets=(0.25, 0.5, 1.0), rng=None) -> dict:
    """Run-level design: widths x depths (shapes) or a Chinchilla-like N x T cloud."""
    rows: dict[str, list] = {k: [] for k in ("run", "params", "tokens", "depth", "width", "seed")}
    if kind == "shapes":
        widths = (64, 128, 256, 512, 1024, 2048, 4096)
        depths = (2, 4, 8, 12, 16, 24, 32, 48, 64)
        for w in widths:
            for d in depths:
                N = 12.0 * d * w * w
                for s in range(seeds):
                    run = f"w{w}d{d}s{s}"
                    for f in budgets:
                        rows["run"].append(run)
                        rows["params"].append(N)
                        rows["tokens"].append(f * max(20.0 * N, 2e8))
                        rows["depth"].append(d)
                        rows["width"].append(w)
                        rows["seed"].append(s)
    elif kind == "chinchilla":
        rng = rng or np.random.default_rng(0)
        for i in range(80):
            N = float(np.exp(rng.uniform(np.log(5e7), np.log(1.6e10))))
            T = N * float(np.exp(rng.uniform(np.log(2.0), np.log(100.0))))
            for s in range(seeds):
                for f in budgets:
                    rows["run"].append(f"r{i}s{s}")
                    rows["params"].append(N)
                    rows["tokens"].append(f * T)
                    rows["depth"].append(24)
                    rows["width"].append(1024)
                    rows["seed"].append(s)
    else:
        raise ValueError(kind)
    return {k: np.asarray(v) for k, v in rows.items()}


def planted_table(
    law: Law,
    values: dict,
    kind: str = "shapes",
    noise: float = 0.005,
    run_noise: float = 0.0,
    seeds: int = 1,
    seed: int = 0,
):
    """DataFrame with canonical columns and losses drawn from ``law`` at ``values``."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    d = design(kind, seeds=seeds, rng=np.random.default_rng(1234))
    df = pd.DataFrame(d)
    df["loss"] = 1.0  # placeholder so law.data() can size its arrays
    L = law.predict(values, df)
    eps = rng.normal(0.0, noise, len(df))
    if run_noise:
        codes, u = pd.factorize(df["run"])
        eps = eps + rng.normal(0.0, run_noise, len(u))[codes]
    df["loss"] = L * np.exp(eps)
    df["flops"] = 6.0 * df["params"] * df["tokens"]
    return df


# FLOPs to match (fit/match.py): uniform follows L_u(C) = E + A·(C/1e18)^-alpha; the x shape
# follows the same curve shifted in FLOPs, L_x(C) = L_u(C / fraction).  Sizes h, L = h/32,
# C_u = 1e18·(h/256)^4, C_x = 0.95·C_u (x has fewer FLOPs at the same h, L), mean width of x 0.9·h,
# KV bytes/token 4·L·(mean width).
MATCH_CURVE = {"E": 1.8, "A": 2.0, "alpha": 0.15}
MATCH_SIZES = (256, 384, 512, 768, 1024, 1536)


def match_table(fraction: float = 0.78, noise: float = 0.002, seeds: int = 2, sizes=MATCH_SIZES, seed: int = 0):
    """A run table (one row per run) for FLOPs-to-match tests; multiplicative log-normal noise per run."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    p = MATCH_CURVE

    def loss_u(C):
        return p["E"] + p["A"] * (C / 1e18) ** -p["alpha"]

    rows = []
    for shape in ("uniform", "x"):
        for h in sizes:
            L = h // 32
            C = 1e18 * (h / 256) ** 4 * (1.0 if shape == "uniform" else 0.95)
            mw = float(h) if shape == "uniform" else 0.9 * h
            for s in range(seeds):
                clean = loss_u(C) if shape == "uniform" else loss_u(C / fraction)
                rows.append(
                    {
                        "run": f"{shape}-h{h}-s{s}",
                        "shape": shape,
                        "depth": L,
                        "width": h,
                        "seed": s,
                        "flops": C,
                        "tokens": C / (6.0 * 12 * L * h * h),
                        "params": 12.0 * L * h * h,
                        "loss": clean * float(np.exp(rng.normal(0.0, noise))),
                        "mean_width": mw,
                        "kv_bytes_per_token": 4.0 * L * mw,
                    }
                )
    return pd.DataFrame(rows)


def chinchilla_optimum(values: dict, C):
    """N*(C) of E + A/N^alpha + B/T^beta under C = 6·N·T (closed form)."""
    a, b = values["alpha"], values["beta"]
    G = (a * values["A"] / (b * values["B"])) ** (1.0 / (a + b))
    return G * (np.asarray(C, dtype=float) / 6.0) ** (b / (a + b))


def width_depth_depth_optimum(values: dict, N):
    """D*(N) of the width-depth law at fixed N = 12·D·W²: dL/dD = 0 with W = sqrt(N/(12 D))."""
    aw, ad = values["a_w"], values["a_d"]
    k = 2.0 * ad * values["A_d"] / (aw * values["A_w"]) * (np.asarray(N, dtype=float) / 12.0) ** (aw / 2.0)
    return k ** (1.0 / (ad + aw / 2.0))


def isoflop_table(
    law: Law,
    values: dict,
    budgets=(1e18, 1e19, 1e20, 1e21),
    axis: str = "params",
    n: int = 7,
    span: float = 1.5,
    offset: float = 0.3,
    noise: float = 0.003,
    seed: int = 0,
    tokens_per_param: float = 20.0,
    grid=None,
):
    """An isoFLOP design with losses from ``law``: per budget C, ``n`` runs log-spaced over
    ±``span`` (in ln x) around the law's own optimum shifted by ``offset`` (so the grid is not
    centred on the answer), or, with ``grid``, the same x values at every budget (as a sweep
    file's fixed list of depths).  Axis ``params``: N varies, T = C/(6N).  Axis ``depth``: N and T
    fixed per budget (T = tokens_per_param·N, C = 6·N·T), D varies and W = sqrt(N/(12 D)).
    Returns (DataFrame, {C: true optimum})."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows, truth = [], {}
    for C in budgets:
        if axis == "params":
            opt = float(chinchilla_optimum(values, C))
            xs = opt * np.exp(offset + np.linspace(-span, span, n)) if grid is None else np.asarray(grid, dtype=float)
            for i, x in enumerate(xs):
                rows.append(
                    {"run": f"C{C:.0e}n{i}", "params": x, "tokens": C / (6 * x), "depth": 24, "width": 1024, "flops": C}
                )
        else:
            N = math.sqrt(C / (6.0 * tokens_per_param))
            opt = float(width_depth_depth_optimum(values, N))
            ds = opt * np.exp(offset + np.linspace(-span, span, n)) if grid is None else np.asarray(grid, dtype=float)
            for i, D in enumerate(ds):
                rows.append(
                    {
                        "run": f"C{C:.0e}d{i}",
                        "params": N,
                        "tokens": tokens_per_param * N,
                        "depth": D,
                        "width": math.sqrt(N / (12.0 * D)),
                        "flops": C,
                    }
                )
        truth[C] = opt
    df = pd.DataFrame(rows)
    df["loss"] = 1.0
    df["loss"] = law.predict(values, df) * np.exp(rng.normal(0.0, noise, len(df)))
    return df, truth


def isoflop_exponents(
    values: dict, axis: str = "params", budgets=(1e18, 1e19, 1e20, 1e21), tokens_per_param: float = 20.0
) -> dict:
    """The planted law's exact exponents of its optima in C along ``isoflop_table``'s budgets.

    Axis ``params`` (chinchilla): {"N": β/(α+β)}.  Axis ``depth`` (width-depth at N = sqrt(C/(6k))):
    the slopes in ln C of ln D*(N) (``width_depth_depth_optimum``) and of ln W* = ln sqrt(N/(12 D*)).
    """
    if axis == "params":
        return {"N": values["beta"] / (values["alpha"] + values["beta"])}
    C = np.asarray(budgets, dtype=float)
    N = np.sqrt(C / (6.0 * tokens_per_param))
    D = width_depth_depth_optimum(values, N)
    return {
        "D": float(np.polyfit(np.log(C), np.log(D), 1)[0]),
        "W": float(np.polyfit(np.log(C), 0.5 * np.log(N / (12.0 * D)), 1)[0]),
    }
