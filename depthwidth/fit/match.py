"""FLOPs to match the uniform loss (Variable-Width paper, docs/science.md §2).

Per width shape, loss against training compute C is fitted as a power law
with an irreducible term,

    L_s(C) = E_s + A_s · (C / C_ref)^(-alpha_s)

by the same robust multi-start Huber fit as every ``dw fit`` law (engine.py,
one point per run).  C_ref is a power of ten near the geometric mean of the
table's FLOPs; it only keeps A of order one and changes no result.  For each
uniform size i (training FLOPs C_i) and every other shape s, the shape's curve
is inverted at the uniform curve's loss there:

    C*_s,i = C_ref · (A_s / (L_u(C_i) - E_s))^(1/alpha_s),   fraction = C*_s,i / C_i

(no match when L_u(C_i) <= E_s: the shape's fitted curve never gets there).
Mean width and KV cache of shape s at C* are interpolated linearly in
log-log between the shape's own sizes (extended along the end segments
outside them; such rows are flagged ``extrapolated``) and divided by the
uniform size's own.  The paper: the × model reaches the 2B uniform loss 2.751
with 77.8% of its FLOPs and 85.1% of its mean width (-15% KV cache).

Conventions: a run contributes its largest token budget (each size's own
full training run, as in the paper's curves); a *size* is one (depth, width)
(or one FLOPs value without those columns).  Three or more sizes fit E; two
sizes fit the pure power law A·C^-alpha (E = 0).  Intervals: percentile
bootstrap resampling runs within each shape (shapes drawn independently);
replicates left with fewer sizes than free parameters are dropped and counted;
a shape with fewer than its free parameters + ``MIN_SPARE_RUNS`` runs gets no
intervals (one warning line), as resampling so few runs is not calibrated.

Public: ``flops_to_match`` (a ``Match``), ``final_points``, ``curve_law``.  The analysis (``dw fit
--match``, match.json; its verdict lines and tables): fit/analyses/match.py.
"""

from __future__ import annotations

from depthwidth.fit.defaults import default

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from depthwidth.core.errors import BadInput
from depthwidth.fit.papers import VWT_MATCH
from depthwidth.fit.boot import percentile_ci, refit_many, run_weights
from depthwidth.fit.engine import DEFAULT_DELTA, fit_law
from depthwidth.fit.laws import Const, Law, Power, coef, expo, irreducible_param
from depthwidth.fit.options import FitOptions
from depthwidth.fit.table import EXCLUDED_STATUS

# A shape's run bootstrap needs this many runs beyond its curve's free parameters: with 4 runs (one a size) for
# E, A, alpha the resampled curves pass through their points, and a × planted identical to uniform had an
# interval excluding 1 in 45% of tables (5 runs: 7.5%, 6: 0%; benchmarks/bench_verdicts.py, kind match)
MIN_SPARE_RUNS = 3
BASELINE = "uniform"
NEEDS = "needs ≥2 sizes per shape"
PAPER_MATCH = VWT_MATCH  # Wu et al.'s headline (fit/papers.py; docs/science.md §2 "Efficiency accounting")


def curve_law(irreducible: bool = True) -> Law:
    """L = E + A·x^-alpha (or A·x^-alpha), x = C / C_ref in the table's ``flops`` column."""
    ps = [coef("A", grid=(-2.0, -0.5, 1.0)), expo("alpha", grid=(0.05, 0.15, 0.4, 1.0))]
    terms = [Power("A", (("alpha", "flops"),))]
    formula = "A*(C/C_ref)^-alpha"
    if irreducible:
        ps.insert(0, irreducible_param(grid=(-1.0, 0.0, 0.5, 1.0)))
        terms.append(Const("E"))
        formula = "E + " + formula
    return Law("loss-vs-flops", formula, tuple(ps), tuple(terms), {"irreducible": irreducible})


@dataclass
class Curve:
    """One shape's fitted L(C), its data and its bootstrap."""

    shape: str
    formula: str
    params: dict  # E (0 when not fitted), A, alpha
    ci: dict
    sizes: int
    runs: int
    r2: float
    rmse_log: float
    flops_range: list  # [min C, max C] of its sizes
    replicates_used: int


@dataclass
class MatchRow:
    """Shape ``shape`` against the uniform model of one size."""

    shape: str
    depth: int | None
    width: int | None
    flops_uniform: float  # C_i
    loss_uniform: float  # observed, mean over the size's runs
    loss_uniform_fit: float  # L_u(C_i), the loss to reach
    flops_match: float | None  # C*
    flops_fraction: float | None
    flops_fraction_ci: list | None
    mean_width_ratio: float | None
    mean_width_ratio_ci: list | None
    kv_ratio: float | None
    kv_ratio_ci: list | None
    extrapolated: bool  # C* outside the shape's own sizes
    unreachable: float  # share of replicates whose curve never reaches the loss


@dataclass
class Match:
    baseline: str
    c_ref: float
    curves: list[Curve]
    rows: list[MatchRow]
    sizes: dict  # shape -> number of sizes
    bootstrap: dict
    warnings: list[str] = field(default_factory=list)
    paper: dict = field(default_factory=lambda: dict(PAPER_MATCH))

    def to_dict(self) -> dict:
        return {
            "baseline": self.baseline,
            "c_ref": self.c_ref,
            "curves": [asdict(c) for c in self.curves],
            "rows": [asdict(r) for r in self.rows],
            "sizes": dict(self.sizes),
            "bootstrap": dict(self.bootstrap),
            "warnings": list(self.warnings),
            "paper": dict(self.paper),
        }


def final_points(table):
    """One row per usable run: its largest budget (run, shape, loss, flops, size, mean_width, kv_bytes_per_token)."""
    import pandas as pd

    df = pd.DataFrame(table).copy()
    for c in ("loss", "flops"):
        if c not in df.columns:
            raise BadInput(
                f"missing column {c} for FLOPs to match (table has: {', '.join(map(str, df.columns))[:300]}; "
                f"map with --columns {c}=COLUMN)"
            )
    if "run" not in df.columns:
        df["run"] = [f"row{i}" for i in range(len(df))]
    df["run"] = df["run"].astype(str)
    shape = df["shape"] if "shape" in df.columns else pd.Series([None] * len(df), index=df.index)
    df["shape"] = [
        BASELINE if s is None or (isinstance(s, float) and math.isnan(s)) or s == "" else str(s) for s in shape
    ]
    for c in ("loss", "flops", "depth", "width", "mean_width", "kv_bytes_per_token"):
        df[c] = pd.to_numeric(df[c], errors="coerce") if c in df.columns else np.nan
    if "status" in df.columns:
        df = df[~df["status"].astype(str).str.lower().isin(EXCLUDED_STATUS)]
    df = df[np.isfinite(df["loss"]) & np.isfinite(df["flops"]) & (df["loss"] > 0) & (df["flops"] > 0)]
    df = df.sort_values("flops", kind="stable").groupby("run", sort=False).tail(1)
    # A uniform run's mean width is its width; other shapes need the column (run tables have it).
    uni = (df["shape"] == BASELINE) & ~np.isfinite(df["mean_width"])
    df.loc[uni, "mean_width"] = df.loc[uni, "width"]
    has_dims = np.isfinite(df["depth"]) & np.isfinite(df["width"])
    df["size"] = np.where(
        has_dims, df["depth"].astype(str) + "x" + df["width"].astype(str), np.log(df["flops"]).round(6).astype(str)
    )
    return df.reset_index(drop=True)


def _loss_at(p: dict, x):
    return p["E"] + p["A"] * np.power(x, -p["alpha"])


def _x_for(p: dict, loss):
    """x = C/C_ref where the curve reaches ``loss``; nan where it never does."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        gap = np.asarray(loss, float) - p["E"]
        ok = (gap > 0) & (np.asarray(p["alpha"]) > 0)
        x = np.power(p["A"] / np.where(ok, gap, 1.0), 1.0 / np.where(ok, p["alpha"], 1.0))
    return np.where(ok, x, np.nan)


def _loglog(c, cs, vs):
    """Value at C = ``c`` of the piecewise log-log line through (cs, vs), end segments extended."""
    cs, vs = np.asarray(cs, float), np.asarray(vs, float)
    lc, lv, x = np.log(cs), np.log(vs), np.log(np.asarray(c, float))
    y = np.interp(x, lc, lv)
    lo = (lv[1] - lv[0]) / (lc[1] - lc[0])
    hi = (lv[-1] - lv[-2]) / (lc[-1] - lc[-2])
    y = np.where(x < lc[0], lv[0] + lo * (x - lc[0]), np.where(x > lc[-1], lv[-1] + hi * (x - lc[-1]), y))
    return np.exp(y)


def _per_size(g):
    """Sizes of one shape sorted by FLOPs: C, loss, mean width, KV (means over the size's runs)."""
    s = g.groupby("size", sort=False).agg(
        flops=("flops", "mean"),
        loss=("loss", "mean"),
        depth=("depth", "first"),
        width=("width", "first"),
        mean_width=("mean_width", "mean"),
        kv=("kv_bytes_per_token", "mean"),
    )
    return s.sort_values("flops").reset_index()


def _fit_shape(shape, g, c_ref, B, level, rng, delta, seed, warnings):
    """(Curve, point params, replicate params (B,) arrays with nan where dropped)."""
    k = g["size"].nunique()
    law = curve_law(irreducible=k >= 3)
    k_free = len(law.params)
    tab = {"loss": g["loss"].to_numpy(float), "flops": g["flops"].to_numpy(float) / c_ref, "run": g["run"].to_numpy()}
    fr = fit_law(tab, law, delta=delta, seed=seed)
    warnings += [f"{shape}: {w}" for w in fr.warnings]
    point = {"E": 0.0, **fr.params}
    reps = {n: np.full(B, np.nan) for n in ("E", "A", "alpha")}
    used = 0
    n = len(g)
    if B > 0 and n < k_free + MIN_SPARE_RUNS:  # resampling so few runs refits curves through their points
        warnings.append(
            f"{shape}: {n} runs for {k_free} parameters: too few to resample (a run bootstrap needs "
            f"{k_free + MIN_SPARE_RUNS}), so no intervals; more sizes or seeds per size give them"
        )
    elif B > 0:
        W = run_weights(np.arange(n), n, B, rng)
        size_code = g["size"].astype("category").cat.codes.to_numpy()
        kept = np.array([len(np.unique(size_code[w > 0])) >= k_free for w in W])
        bt = refit_many(fr, tab, W)
        ok = bt["ok"] & kept
        nat = law.natural_batch(bt["theta"])
        for name in reps:
            v = np.asarray(nat[name], float) if name in nat else np.zeros(B)
            reps[name] = np.where(ok, v, np.nan)
        used = int(ok.sum())
        if used < 0.5 * B:
            warnings.append(f"{shape}: only {used} of {B} bootstrap replicates kept enough sizes to refit")
    if k == 2:
        warnings.append(
            f"{shape}: 2 sizes: fitted without E (a pure power law); 3 or more sizes fit the irreducible term"
        )
    elif k == k_free:
        warnings.append(f"{shape}: {k} sizes for {k_free} parameters: the curve passes through its points")
    ci = {n: percentile_ci(reps[n], level) for n in (["E"] if k >= 3 else []) + ["A", "alpha"]}
    sizes = _per_size(g)
    curve = Curve(
        shape,
        law.formula,
        point,
        ci,
        int(k),
        int(len(g)),
        float(fr.r2),
        float(fr.rmse_log),
        [float(sizes["flops"].min()), float(sizes["flops"].max())],
        used,
    )
    return curve, point, reps


def _ratio(c, s_sizes, col, base):
    """``col`` along the shape's sizes at C = ``c`` over the uniform size's ``base`` (None without data)."""
    v = s_sizes[col].to_numpy(float)
    if c is None or not (np.isfinite(v).all() and (v > 0).all() and math.isfinite(base) and base > 0):
        return None
    return _loglog(c, s_sizes["flops"].to_numpy(float), v) / base


def _ci_of(samples, level, open_top: bool = False):
    """Percentile interval of the finite samples; ``open_top``: the upper end is unbounded (None)."""
    if samples is None:
        return None
    s = np.asarray(samples, float)
    ci = percentile_ci(s[np.isfinite(s)], level)
    return [ci[0], None] if ci is not None and open_top else ci


def _open_ci(s, level):
    """Percentile interval of samples that may be +inf; a non-finite end is None."""
    if len(s) < 2 or not np.isfinite(s).any():
        return None
    with np.errstate(invalid="ignore"):
        lo, hi = np.percentile(s, [50 * (1 - level), 50 * (1 + level)])
    return [float(lo), float(hi) if math.isfinite(hi) else None] if math.isfinite(lo) else None


def _row(s, u, curve, ps, rs, pu, ru, s_sizes, c_ref, level) -> MatchRow:
    """Shape ``s`` against uniform size ``u``: point estimates from the fits, intervals from the replicates."""
    c_i = float(u["flops"])
    target = float(_loss_at(pu, c_i / c_ref))
    xs = float(_x_for(ps, target))
    c_star = xs * c_ref if math.isfinite(xs) else None
    # Replicate b: the uniform's replicate b sets the loss to reach, the shape's replicate b is inverted there.
    valid = np.isfinite(ru["A"]) & np.isfinite(rs["A"])
    cs_b = (_x_for(rs, _loss_at(ru, c_i / c_ref)) * c_ref)[valid]
    reach = cs_b[np.isfinite(cs_b)]
    unreach = float(np.mean(~np.isfinite(cs_b))) if len(cs_b) else 0.0
    # A replicate whose curve never reaches the loss needs unbounded FLOPs: it counts as +inf, so
    # the upper end is open (None) when such replicates reach the upper percentile.
    ci_f = _open_ci(np.where(np.isfinite(cs_b), cs_b / c_i, np.inf), level)
    open_top = ci_f is not None and ci_f[1] is None  # width and KV grow with C along a shape: open too
    ratio, ratio_ci = {}, {}
    for key, col in (("mean_width", "mean_width"), ("kv", "kv")):
        v = _ratio(c_star, s_sizes, col, u[col])
        ratio[key] = None if v is None else float(v)
        ratio_ci[key] = _ci_of(_ratio(reach, s_sizes, col, u[col]), level, open_top) if len(reach) else None
    return MatchRow(
        shape=s,
        depth=_int(u["depth"]),
        width=_int(u["width"]),
        flops_uniform=c_i,
        loss_uniform=float(u["loss"]),
        loss_uniform_fit=target,
        flops_match=c_star,
        flops_fraction=c_star / c_i if c_star else None,
        flops_fraction_ci=ci_f,
        mean_width_ratio=ratio["mean_width"],
        mean_width_ratio_ci=ratio_ci["mean_width"],
        kv_ratio=ratio["kv"],
        kv_ratio_ci=ratio_ci["kv"],
        extrapolated=bool(c_star is None or not curve.flops_range[0] <= c_star <= curve.flops_range[1]),
        unreachable=unreach,
    )


def flops_to_match(
    table,
    *,
    baseline: str = BASELINE,
    bootstrap: int = 200,
    level: float = default("level"),
    seed: int = 0,
    delta: float = DEFAULT_DELTA,
) -> Match:
    """The fraction of the uniform model's FLOPs (mean width, KV cache) each shape needs to reach its loss."""
    FitOptions(bootstrap=bootstrap, level=level, delta=delta).check_sampling()
    pts = final_points(table)
    sizes = {s: int(g["size"].nunique()) for s, g in pts.groupby("shape")}
    have = ", ".join(f"{s} {n}" for s, n in sorted(sizes.items())) or "no usable runs"
    others = [s for s, n in sorted(sizes.items()) if s != baseline and n >= 2]
    if sizes.get(baseline, 0) < 2 or not others:
        raise BadInput(
            f"FLOPs to match {NEEDS}: {baseline} and at least one other shape with 2 or more sizes "
            f"(sizes per shape: {have})"
        )
    warnings = [f"{s}: {n} size: left out ({NEEDS})" for s, n in sorted(sizes.items()) if n < 2 and s != baseline]
    runs_in = {str(r) for r in table["run"]} if "run" in table else set()
    dropped = sorted(runs_in - set(pts["run"]))
    if dropped:
        warnings.append(
            f"{len(dropped)} run(s) left out (diverged, failed, or no finite loss and FLOPs): "
            + ", ".join(dropped[:8])
            + (" …" if len(dropped) > 8 else "")
        )
    used = pts[pts["shape"].isin([baseline] + others)]
    c_ref = float(10.0 ** round(float(np.log10(used["flops"]).mean())))
    rng = np.random.default_rng(seed)
    fits = {
        s: _fit_shape(s, used[used["shape"] == s], c_ref, bootstrap, level, rng, delta, seed, warnings)
        for s in [baseline] + others
    }
    _, pu, ru = fits[baseline]
    u_sizes = _per_size(used[used["shape"] == baseline])
    rows = []
    for s in others:
        curve, ps, rs = fits[s]
        s_sizes = _per_size(used[used["shape"] == s])
        for _, u in u_sizes.iterrows():
            r = _row(s, u, curve, ps, rs, pu, ru, s_sizes, c_ref, level)
            rows.append(r)
            if r.flops_match is None:
                warnings.append(
                    f"{s}: its fitted curve never reaches the {baseline} loss {r.loss_uniform_fit:.4g} "
                    f"of the size at C = {r.flops_uniform:.3g} (its E = {ps['E']:.4g})"
                )
    boot = {"replicates": bootstrap, "level": level, "unit": "run, within each shape", "seed": seed}
    return Match(baseline, c_ref, [fits[s][0] for s in [baseline] + others], rows, sizes, boot, warnings)


def _int(x):
    return int(x) if x is not None and math.isfinite(x) else None
