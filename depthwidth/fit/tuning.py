"""Tuning groups (sweep file ``tune:``): the best setting of each group, and the law fitted on it.

A tuning group is one configuration trained at several values of a tuned setting (the learning
rate, say); the run table carries each run's ``group`` and the tuned value (a column named as the
setting, ``optim.lr``).  Per group:

* **best measured**: the run with the lowest final held-out loss (the mean over its seeds when a
  value was run with several);
* **interpolated**: a parabola in log(value) through the best value and its two neighbours; its
  vertex is the optimum and its height the loss there.  Its interval comes from refitting the
  parabola to the three losses redrawn with the runs' seed noise (the sweep's measured
  seed-to-seed spread when it has replicated seeds, else ``SEED_NOISE``), percentiles of the
  vertex; the fraction of redraws whose parabola has no minimum is reported beside it.
* **edge**: a best value at either end of the grid is flagged "extend the grid", with the next
  value one grid step beyond it (the ratio of the two values at that end): the optimum may lie
  outside, and neither the measured best nor a parabola can say where.

``dw fit`` on a tuned sweep fits the law on each group's best (``--tuned best``, the default: the
best run's points, every token budget) or on the interpolated losses (``--tuned interpolated``:
the best run's points with the loss at each budget replaced by the parabola's minimum through the
three runs' losses at that budget, where the best is interior); a fit on ``best`` equals a fit on
a table of only those runs (tests/test_tuning.py).  No torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from depthwidth.core.errors import bad
from depthwidth.fit.predict import SEED_NOISE
from depthwidth.fit.table import last_points

MODES = ("best", "interpolated")
BOOT = 400  # redraws of the parabola's three losses


@dataclass
class Pick:
    group: str
    key: str  # the tuned setting
    values: list  # its values in the group, ascending
    losses: list  # final loss per value (mean over seeds)
    best: float  # the best measured value
    best_loss: float
    best_run: str
    optimum: float | None = None  # the parabola's vertex (None: at an edge, or no minimum)
    optimum_ci: tuple | None = None
    optimum_loss: float | None = None
    no_minimum: float = 0.0  # fraction of redraws whose parabola opens downward
    edge: str | None = None  # "low" | "high": the best is at that end of the grid
    next_value: float | None = None  # the value that extends the grid on that side
    pruned: list = field(default_factory=list)  # values successive halving stopped at the first budget

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def tuned_key(df) -> str | None:
    """The tuned setting's column (one per sweep; ``optim.lr``), None for an untuned table."""
    if "group" not in df or not df["group"].notna().any():
        return None
    keys = [c for c in df.columns if "." in str(c) and ":" not in str(c)]
    if len(keys) != 1:
        raise bad(
            "--tuned",
            ", ".join(keys) or "none",
            "a sweep that tunes exactly one setting (several at once: fit each group's best by hand)",
        )
    return keys[0]


def parabola(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """(vertex x, its y) of the parabola through three points; None when it opens downward."""
    a, b, c = np.polyfit(x, y, 2)
    if not a > 0:
        return None
    xv = -b / (2 * a)
    return float(xv), float(c - b * b / (4 * a))


def pick(
    group: str, key: str, values, losses, runs, noise: float, level: float = 0.95, seed: int = 0, pruned=()
) -> Pick:
    """The best value of one group, measured and interpolated, with the edge flag.  ``pruned``: the
    group's values successive halving stopped early (worse at the first budget): an end of the runs
    that trained on with a pruned value beyond it is not an edge of the grid."""
    order = np.argsort(np.asarray(values, dtype=float))
    v = np.asarray(values, dtype=float)[order]
    y = np.asarray(losses, dtype=float)[order]
    runs = [runs[i] for i in order]
    i = int(np.argmin(y))
    p = Pick(group, key, v.tolist(), y.tolist(), float(v[i]), float(y[i]), runs[i], pruned=sorted(pruned))
    if len(v) >= 2 and i in (0, len(v) - 1):
        if any((h < v[0]) if i == 0 else (h > v[-1]) for h in pruned):
            return p  # the grid goes on there; halving found it worse
        p.edge = "low" if i == 0 else "high"
        j = (0, 1) if i == 0 else (-1, -2)
        p.next_value = float(v[j[0]] * (v[j[0]] / v[j[1]]))  # one grid step beyond the end, log-spaced
        return p
    if len(v) < 3:
        return p
    x, yy = np.log(v[i - 1 : i + 2]), y[i - 1 : i + 2]
    vert = parabola(x, yy)
    if vert is None:
        return p
    p.optimum, p.optimum_loss = float(math.exp(vert[0])), vert[1]
    rng = np.random.default_rng(seed)
    draws = yy[None, :] * np.exp(rng.normal(0.0, noise, (BOOT, 3)))
    xs = [parabola(x, d) for d in draws]
    ok = np.array([q[0] for q in xs if q is not None])
    p.no_minimum = float(1 - len(ok) / BOOT)
    if len(ok) >= BOOT // 2:
        lo, hi = np.percentile(ok, [50 * (1 - level), 50 * (1 + level)])
        p.optimum_ci = (float(math.exp(lo)), float(math.exp(hi)))
    return p


HALTED = ("pruned", "waiting")  # successive halving stopped these at their first budget (launch/halving.py)


def trained_on(df):
    """The rows of runs that successive halving did not stop at their first budget: picks compare
    runs at their final points, where a pruned run has none."""
    if "status" not in df:
        return df
    return df[~df["status"].astype(str).isin(HALTED)]


def halved(df) -> bool:
    """Whether successive halving pruned any run of this table."""
    return "status" in df and bool((df["status"].astype(str) == "pruned").any())


def first_points(df):
    """One row per run: its first token budget (successive halving compared every run there)."""
    return df.sort_values("tokens", kind="stable").groupby("run", sort=False).head(1)


def picks(df, noise: float | None = None, level: float = 0.95, seed: int = 0) -> list[Pick]:
    """Every group's pick from a run table (its final points)."""
    key = tuned_key(df)
    if key is None:
        return []
    noise = SEED_NOISE if noise is None else noise
    last = last_points(trained_on(df)[lambda d: d["group"].notna()])
    halted = df[df["status"].astype(str).isin(HALTED)] if "status" in df else df.iloc[:0]
    out = []
    for g, rows in last.groupby("group", sort=True):
        per = rows.groupby(key)
        values = list(per.groups)
        losses = [float(per.get_group(val)["loss"].mean()) for val in values]
        best_runs = [str(per.get_group(val).sort_values("loss")["run"].iloc[0]) for val in values]
        pruned = [float(x) for x in halted.loc[halted["group"] == g, key]]
        out.append(pick(str(g), key, values, losses, best_runs, noise, level, seed, pruned))
    return out


def select(df, mode: str, found: list[Pick]):
    """The table a law is fitted on: every group's best run (all its budget points); with
    ``interpolated``, their losses replaced by the parabola's minimum at each budget where the
    best is interior.  Untuned rows pass through."""
    if mode not in MODES:
        raise bad("--tuned", mode, " | ".join(MODES))
    key = found[0].key
    best = {p.best_run for p in found}
    keep = df["group"].isna() | df["run"].astype(str).isin(best)
    out = df[keep].copy()
    if mode == "best":
        return out.reset_index(drop=True)
    for p in found:
        if p.optimum is None:
            continue
        i = p.values.index(p.best)
        near = p.values[i - 1 : i + 2]
        mine = out["run"].astype(str) == p.best_run
        for idx in out.index[mine]:
            t = out.at[idx, "tokens"]
            at = df[(df["group"] == p.group) & (df["tokens"] == t)]
            y = [float(at[at[key] == val]["loss"].mean()) for val in near]
            if all(math.isfinite(q) for q in y) and (vert := parabola(np.log(near), np.asarray(y))) is not None:
                out.at[idx, "loss"] = vert[1]
    return out.reset_index(drop=True)


def line(t: dict) -> str:
    """The one line ``dw fit`` says about a tuned sweep (first among its notes)."""
    how = "best run" if t["mode"] == "best" else "interpolated optimum"
    s = (
        f"tuned sweep: the law is fitted on each of {t['groups']} groups' {how} over {t['key']} "
        f"(--tuned {t['mode']}; {t['points_fitted']} of {t['points_in_table']} points)"
    )
    if t["extend"]:
        s += (
            f"; {len(t['extend'])} group(s) have their best at the edge of the grid, so their optimum may lie "
            "outside it: dw sweep NAME --extend-tuning adds the next value"
        )
    return s


def section(found: list[Pick], mode: str, n_rows_before: int, n_rows_after: int) -> dict:
    """fit.json's ``tuning``: how the law's table was chosen, every group's pick, the flags."""
    return {
        "mode": mode,
        "key": found[0].key if found else None,
        "groups": len(found),
        "points_fitted": n_rows_after,
        "points_in_table": n_rows_before,
        "extend": [{"group": p.group, "side": p.edge, "next_value": p.next_value} for p in found if p.edge is not None],
        "picks": [p.to_dict() for p in found],
    }


# -- learning-rate laws: dw fit NAME --law lr ----------------------------------------------------

LR_LAW = "lr"
# lr* is called flat in a variable when the exponent is equivalent to 0 within ±FLAT (two one-sided tests at 5%:
# its 90% interval inside ±FLAT): an estimate near 0 inside a wide interval said "flat" of a planted e_D = -0.5
# in 8% of tables (benchmarks/bench_verdicts.py, kind lr_flat)
FLAT = 0.1


def _ols(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(coefficients, their standard errors, residual degrees of freedom) of y ~ X (X with a constant)."""
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = len(y) - X.shape[1]
    resid = y - X @ beta
    s2 = float(resid @ resid) / max(dof, 1)
    cov = s2 * np.linalg.pinv(X.T @ X)
    return beta, np.sqrt(np.clip(np.diag(cov), 0, None)), dof


def lr_fits(df, level: float = 0.95, seed: int = 0) -> dict:
    """lr* (each group's interpolated optimum where it has one, else its best measured value) as a
    power law: in N alone (log lr* = c + e_N log N), and in depth and width together (c + e_D log D
    + e_W log W), ordinary least squares on the logs with t intervals.  Groups at an edge of their
    grid are left out (their lr* is a bound, not a value) and counted.  The numbers of lr_fit.json
    (its verdict lines: fit/analyses/lr_law.py, ``dw fit --law lr``)."""
    from scipy import stats

    found = picks(df, level=level, seed=seed)
    if not found:
        raise bad("--law", LR_LAW, "a law of a table without tuning groups (lr needs a sweep with tune:)")
    if found[0].key != "optim.lr":
        raise bad("--law", LR_LAW, f"a tuned sweep over optim.lr (this one tunes {found[0].key})")
    last = last_points(df[df["group"].notna()])
    rows = []
    for p in found:
        if p.edge is not None:
            continue
        g = last[last["group"] == p.group].iloc[0]
        lr = p.optimum if p.optimum is not None else p.best
        rows.append(
            {"group": p.group, "lr": lr, "params": float(g["params"]), "depth": g.get("depth"), "width": g.get("width")}
        )
    out: dict = {
        "law": LR_LAW,
        "groups": len(found),
        "used": len(rows),
        "at_edge": len(found) - len(rows),
        "level": level,
    }
    if len(rows) < 3:
        raise bad("--law", LR_LAW, f"at least 3 groups with an interior optimum ({len(rows)} have one)")
    y = np.log([r["lr"] for r in rows])
    fits = {"N": ["params"]}
    if all(r["depth"] is not None and r["width"] is not None for r in rows):
        fits["DW"] = ["depth", "width"]
    for name, cols in fits.items():
        X = np.column_stack([np.ones(len(rows))] + [np.log([float(r[c]) for r in rows]) for c in cols])
        rank = int(np.linalg.matrix_rank(X))
        if len(rows) <= X.shape[1] or rank < X.shape[1]:
            out[name] = {"note": f"not identified: {len(rows)} groups, {X.shape[1]} coefficients (rank {rank})"}
            continue
        beta, se, dof = _ols(X, y)
        t = float(stats.t.ppf(0.5 + level / 2, dof))
        names = ["log_c"] + [f"e_{'N' if c == 'params' else c[0].upper()}" for c in cols]
        out[name] = {
            "coef": dict(zip(names, map(float, beta))),
            "ci": {n: [float(b - t * s), float(b + t * s)] for n, b, s in zip(names, beta, se)},
            "dof": dof,
        }
    out["points"] = rows
    return out


def lr_law(df, level: float = 0.95, seed: int = 0) -> dict:
    """``lr_fits`` with its verdict lines (``lr_verdicts``) before the groups' points: the body of
    lr_fit.json as ``dw fit --law lr`` makes it (fit/analyses/lr_law.py), for callers of the statistics
    alone (benchmarks/verdict_kinds.py)."""
    out = lr_fits(df, level, seed)
    points = out.pop("points")
    return {**out, "verdicts": lr_verdicts(out), "points": points}


def lr_verdicts(out: dict) -> list[str]:
    """Plain lines: is lr* flat in width (what µP promises), how it moves with depth at fixed width."""
    from scipy import stats

    lines = []
    dw_fit = out.get("DW") or {}
    ci = dw_fit.get("ci") or {}
    for name, what in (("e_W", "width"), ("e_D", "depth")):
        if name not in ci:
            continue
        e, (lo, hi) = dw_fit["coef"][name], ci[name]
        # flat: equivalence to 0 within ±FLAT by two one-sided tests at 5%, i.e. the 90% interval inside ±FLAT
        dof, level = dw_fit["dof"], out.get("level", 0.95)
        half = (hi - lo) / 2 * float(stats.t.ppf(0.95, dof) / stats.t.ppf(0.5 + level / 2, dof))
        if abs(e) + half < FLAT:
            lines.append(
                f"lr* is flat in {what}: exponent {e:+.3f} [{lo:+.3f}, {hi:+.3f}], within ±{FLAT:g} "
                "(two one-sided tests, 5%)"
            )
        elif lo <= 0 <= hi:
            lines.append(
                f"lr* in {what}: exponent {e:+.3f} [{lo:+.3f}, {hi:+.3f}] holds 0 but reaches beyond ±{FLAT:g}: "
                "too uncertain to say whether it is flat"
            )
        else:
            way, fixed = ("falls" if e < 0 else "rises"), ("depth" if what == "width" else "width")
            lines.append(f"lr* {way} with {what}: lr* ∝ {what}^{e:+.3f} [{lo:+.3f}, {hi:+.3f}] at fixed {fixed}")
    return lines


# -- does the conclusion survive tuning? --------------------------------------------------------


def fixed_value(found: list[Pick]) -> float | None:
    """The one value every group was trained at that lies nearest (in log) the middle of all groups'
    values: the "one learning rate for every rung" protocol the tuned fit is set beside."""
    grids = [set(p.values) | set(p.pruned) for p in found]  # a value halving pruned was trained there too
    shared = set.intersection(*grids)
    if not shared:
        return None
    mid = float(np.median(np.log([v for g in grids for v in g])))
    return min(shared, key=lambda v: (abs(math.log(v) - mid), v))


def numbers(res: dict) -> dict[str, tuple]:
    """{label: (value, ci)}: a fit's parameters, D_crit at its widths and the compute-optimal numbers."""
    out = {k: (v, (res.get("ci") or {}).get(k)) for k, v in (res.get("params") or {}).items()}
    d = res.get("derived") or {}
    for w, x in ((d.get("dcrit") or {}).get("widths") or {}).items():
        out[f"D_crit(W={w})"] = (x.get("value"), x.get("ci"))
    co = d.get("compute_optimal") or {}
    for k in ("D_opt", "W_opt", "N_opt", "W_exponent", "D_exponent", "N_exponent"):
        if k in co:
            out[f"{k} at C={co.get('c_ref', 0):.0e}"] = (co[k], (co.get("ci") or {}).get(k))
    return out


def claim_label(nums: dict) -> str | None:
    """The number the law's claim rests on: D_crit at the middle width, else an exponent."""
    dc = sorted((k for k in nums if k.startswith("D_crit(W=")), key=lambda k: int(k[9:-1]))
    if dc:
        return dc[len(dc) // 2]
    for k in nums:
        if "exponent" in k or k in ("alpha", "beta"):
            return k
    return next(iter(nums), None)


Z_CHANGED = 1.96  # standard errors of the difference beyond which the claim "changes" (two-sided 95%)
# measured by benchmarks/bench_verdicts.py (kind tuning, docs/verdicts.md): 12 Chinchilla groups at 5 learning
# rates, lr* the same for every group, seed noise 0.02 in log loss (100 tables); each of the 9 false CHANGES had a fit
# whose interval of alpha missed the planted 0.34 (the rule is only as good as the two fits' intervals)
FALSE_CHANGES = "in 9 of 100 (9%; 0 of 100 at noise 0.005)"


def _z(fv: float, fci, tv: float, tci) -> float:
    """|difference| in standard errors, each fit's from its interval's half-width (a 95% interval
    spans ±1.96 of them), the two treated as independent: they share some runs (a group whose best
    is the fixed value), which makes the difference's true error smaller and this test conservative."""
    se = math.hypot((fci[1] - fci[0]) / 3.92, (tci[1] - tci[0]) / 3.92)
    return abs(tv - fv) / se if se > 0 else math.inf


def comparison(tuned: dict, fixed: dict, key: str, value: float, at: str = "") -> dict:
    """Side by side: each number of the fit at one value of ``key`` for every group and of the fit on
    each group's best; whether the claim's number changed (by more than ``Z_CHANGED`` standard
    errors of the difference)."""
    a, b = numbers(fixed), numbers(tuned)
    rows = [
        {"number": k, "fixed": a[k][0], "fixed_ci": a[k][1], "tuned": b[k][0], "tuned_ci": b[k][1]} for k in b if k in a
    ]
    claim = claim_label(b)
    line = None
    if claim in a:
        (fv, fci), (tv, tci) = a[claim], b[claim]
        if fci and tci and None not in (fv, tv, *fci, *tci):
            z = _z(fv, fci, tv, tci)
            verdict = (
                "no change of the claim shown with tuning"  # not "survives": wide intervals show no change either
                if z <= Z_CHANGED
                else f"the claim CHANGES with tuning (a rule that said so of planted sweeps where tuning changes "
                f"nothing {FALSE_CHANGES}, when the fits' intervals missed)"
            )
            line = (
                f"{verdict}: {claim} {fv:.3g} [{fci[0]:.3g}, {fci[1]:.3g}] at {key} = {value:g} for every rung vs "
                f"{tv:.3g} [{tci[0]:.3g}, {tci[1]:.3g}] at each group's best (difference {tv - fv:+.3g}, "
                f"{z:.1f} standard errors){at}"
            )
        else:
            line = f"{claim}: {fv} at {key} = {value:g} vs {tv} at each group's best (no intervals to compare){at}"
    return {"key": key, "value": value, "rows": rows, "claim": claim, "line": line, "at": at.strip(" ;") or None}
