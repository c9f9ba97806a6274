"""What a fit says about runs not yet trained, and what training one would teach.

An ``Ensemble`` is a set of parameter vectors of one law that together carry its uncertainty: the
converged bootstrap refits a fit keeps (fit.json ``replicates``), or draws from a prior (fit/prior.py)
when there are no runs yet; plus the noise of a new run's loss (seed-to-seed and per point, the
scales fit/boot.py estimates from the residuals).

``predict``: each row's final loss from the point fit, a confidence interval (percentiles of the
replicates' predictions: the law's uncertainty) and a prediction interval (each replicate plus one
fresh draw of a new run's noise, with the noise scales' own uncertainty; the interval for a loss
that will be *measured*).  A confidence interval used as a prediction interval undercovers once the
noise is comparable to the fit's uncertainty (fit/holdout.py says the same of held-out runs).

``Target``: the one number a design should pin down, per replicate (``parse_target``):
``dcrit@W`` (D_crit at width W), a parameter of the law (``alpha``), a compute-optimal number at a
compute (``W_exponent``, ``D_exponent``, ``N_exponent``, ``T_exponent``, ``D_opt``, ``W_opt``,
``N_opt``, each ``@C``, default 1e21) and ``optimum@C`` (the compute-optimal depth D_opt: the shape
at that compute, since W_opt follows from N_opt and D_opt) and ``gap@N`` (the loss of the × shape
minus the uniform model's at N parameters and 20 N tokens, in nats; ``gap@1e9,tokens=5e10,
shape=diamond`` sets the tokens, the shape, or any other column the law reads: a law that reads the
shape through an indicator column, e.g. docs/laws/shape_gap.yaml).

``Design``: the value of running a candidate is how much its measured loss is expected to shrink
the target's variance.  Under the linear-Gaussian approximation the ensemble gives (an ensemble
Kalman update: the target and the candidates' log losses jointly Gaussian with the replicates'
covariance), observing candidate x with noise variance s² leaves

    Var(T | y_x) = Var(T) − Cov(T, y_x)² / (Var(y_x) + s²).

Greedy batch choice conditions the joint covariance on each pick before the next, so a second run
that would teach what the first already teaches is worth little.  The ranking treats the law's
misfit as correlated between neighbouring configurations (``misfit_kernel``: many cheap runs in one
corner share it, and a region's own misfit is learned only near it); the promise (``width_after``)
is the interval the refit will report: from a fit's bootstrap the ensemble's Kalman update, from a
prior what the runs alone determine (``_data_only_widths``), docs/design.md "The promise".
Why not refit per candidate: that is one bootstrap per candidate and replicate (hours for a 30-run
grid); the update costs one covariance matrix, works for any law and any target the replicates can
compute, and its choices are checked against random designs on planted worlds (tests/test_design.py).
Its limit: where the target depends on the loss far from linearly over the replicates' spread (a
D_crit the data do not bracket yet), the expected reduction is approximate; rounds (fit, suggest,
run, refit) correct it.

No torch, no pandas at import.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from depthwidth.core.errors import BadInput, bad
from depthwidth.fit.boot import draw_noise
from depthwidth.fit.derived import CountModel, count_of
from depthwidth.fit.derived import C_REF, derived_numbers
from depthwidth.fit.laws import Law
from depthwidth.fit.misfit import MISFIT_LENGTH, misfit_corr, run_columns
from depthwidth.fit.target_fit import design_weights
from depthwidth.fit.userlaw import OUTPUT, outputs

OPTIMA = ("W_exponent", "D_exponent", "N_exponent", "T_exponent", "D_opt", "W_opt", "N_opt")
TARGETS_ALLOWED = (
    "dcrit@WIDTH, a parameter of the law, optimum@C, gap@N[,COLUMN=VALUE...], or one of "
    + ", ".join(OPTIMA)
    + " (@C optional)"
)
GAP_BASE = "uniform"  # the shape a gap is measured against
GAP_SHAPE = "x"  # the shape a gap measures by default (the Variable-Width paper's headline)
TOKENS_PER_PARAM = 20.0  # a gap@N's tokens when not given: Chinchilla's compute-optimal ratio
SEED_NOISE = 0.006  # log loss: seed-to-seed spread assumed when a fit has no replicated seeds (fit/prior.py's)


@dataclass
class Ensemble:
    law: Law
    point: np.ndarray  # (P,) internal parameters of the point fit (or the prior's centre)
    theta: np.ndarray  # (B, P) internal parameter replicates
    noise: dict  # noise scales of log loss: run, point, df_run, df_point (fit/boot.noise_scales)
    count: CountModel | None = None  # N(D, W) in the fit's convention, for compute-optimal targets
    convention: str = "total"  # which parameter count the law reads as N (fit/derived.py)
    level: float = 0.95
    source: str = "fit"  # fit | prior NAME | rml (N runs)
    notes: list = field(default_factory=list)
    runs: list | None = None  # rows of the runs a prior-based ensemble (rml, prior: none) was fitted to

    @property
    def from_fit(self) -> bool:
        """Whether the replicates are a fit's bootstrap (the refit after new runs is the same kind of
        bootstrap, of more runs) rather than draws from a prior (which the refit forgets)."""
        return self.source == "fit"

    @property
    def new_run_var(self) -> float:
        """Variance of one new run's final log loss around the law: per run plus per point."""
        return float(self.noise.get("run", 0.0) ** 2 + self.noise.get("point", 0.0) ** 2)

    @property
    def seed_var(self) -> float:
        """The part of a new run's variance that a replicate (the same configuration, another seed)
        draws afresh: the seeds' spread where the fit measured it (fit/boot.noise_scales ``seed``), else
        the per-run noise less the share its residuals' pattern calls misfit (``misfit_share``: shared by
        neighbouring configurations), else (too few runs to tell) up to ``SEED_NOISE``, plus the per-point
        noise.  The rest of the per-run
        noise (``misfit_var``) is the law's misfit at that configuration, which replicates share."""
        run, seed, share = self.noise.get("run", 0.0), self.noise.get("seed"), self.noise.get("misfit_share")
        if seed is None:  # seeds not replicated: the residuals' own split (fit/misfit.py), else the prior
            seed = run * math.sqrt(1.0 - share) if share is not None else min(run, SEED_NOISE)
        seed = min(seed, run)
        return float(seed**2 + self.noise.get("point", 0.0) ** 2)

    @property
    def misfit_var(self) -> float:
        return max(self.new_run_var - self.seed_var, 0.0)


def ensemble_of(fit: dict) -> Ensemble:
    """The ensemble a fit.json document holds (its ``replicates``); BadInput when it has none."""
    from depthwidth.fit.userlaw import law_of_label
    from depthwidth.fit.verdicts import fitted_label

    rep = fit.get("replicates")
    if not rep or not rep.get("theta"):
        raise bad(
            "fit",
            "without replicates",
            "a fit made with --bootstrap > 0 by this version of dw fit (refit: dw fit NAME --law LAW)",
        )
    law = law_of_label(fitted_label(fit), fit.get("options"))
    nc = fit.get("n_convention") or {}
    return Ensemble(
        law=law,
        point=np.asarray(rep["point"], dtype=float),
        theta=np.asarray(rep["theta"], dtype=float),
        noise=dict(rep["noise"]),
        count=count_of(nc.get("count")),
        convention=nc.get("name") or "total",
        level=float((fit.get("bootstrap") or {}).get("level", 0.95)),
        source="fit",
    )


# -- predictions ---------------------------------------------------------------------------


def _table(ens: Ensemble, rows):
    """Rows (mappings or a DataFrame) as the law's input table, N in the ensemble's convention."""
    import pandas as pd

    from depthwidth.fit.derived import with_convention

    df = pd.DataFrame(rows).reset_index(drop=True)
    if "loss" not in df:
        df["loss"] = 1.0  # law.data sizes its arrays by it
    if "params" in ens.law.columns or ens.convention == "12DW2":
        df, _ = with_convention(df, ens.convention)
    return df


def outputs_of(ens: Ensemble) -> list[str]:
    """A multi-output law's outputs, in order (fit/userlaw.py ``outputs:``); [] for a law of one."""
    return outputs(ens.law)


def run_rows(ens: Ensemble, rows) -> list[dict]:
    """Each run of ``rows`` (mappings or a DataFrame: one per run, as a sweep's candidates are) as the
    law's rows: itself for a law of one output; for a multi-output law one row per run and output,
    run-major (run j's outputs at j*m ... j*m + m - 1), each naming its ``output``: what one run of
    one cost reveals.  Rows that already name their output are left as they are."""
    recs = rows.to_dict("records") if hasattr(rows, "to_dict") else [dict(r) for r in rows]
    outs = outputs_of(ens)
    if not outs or _name_output(recs):
        return recs
    return [{**r, OUTPUT: o} for r in recs for o in outs]


def _name_output(rows) -> bool:
    """Whether ``rows`` (mappings or a DataFrame) name each row's output (a multi-output law's long form)."""
    if hasattr(rows, "columns"):
        return OUTPUT in rows.columns
    return all(OUTPUT in r for r in rows)


def _per_run(ens: Ensemble, rows) -> int:
    """The law's rows one run of ``rows`` is (``run_rows``): a multi-output law's outputs, else 1
    (a law of one output, or rows that already name their output: each its own observation)."""
    outs = outputs_of(ens)
    return len(outs) if outs and not _name_output(rows) else 1


def predict_outputs(ens: Ensemble, rows, seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """{output: ``predict`` of every row at that output}: a multi-output law's predictions of the
    runs ``rows`` (one per run, no ``output`` column); {} for a law of one output."""
    recs = rows.to_dict("records") if hasattr(rows, "to_dict") else [dict(r) for r in rows]
    return {o: predict(ens, [{**r, OUTPUT: o} for r in recs], seed) for o in outputs_of(ens)}


def log_predictions(ens: Ensemble, rows) -> tuple[np.ndarray, np.ndarray]:
    """(point (n,), replicates (B, n)) log losses of ``rows`` (losses for a law fitted with objective: raw)."""
    X = ens.law.data(_table(ens, rows))
    point = ens.law.evaluate(ens.point[None, :], X)[0]
    reps = ens.law.evaluate(ens.theta, X) if len(ens.theta) else point[None, :]
    return point, reps


def predict(ens: Ensemble, rows, seed: int = 0) -> dict[str, np.ndarray]:
    """Per row: ``loss`` (the point fit), ``ci`` and ``pi`` (2, n) at the ensemble's level.  A
    multi-output law's rows name their ``output`` (``predict_outputs``: every output of each run)."""
    outs = outputs_of(ens)
    if outs and not _name_output(rows):
        raise BadInput(
            f"predict: the {ens.law.name} law has several outputs ({', '.join(outs)}): rows name their "
            f"{OUTPUT}, or predict_outputs predicts each"
        )
    point, reps = log_predictions(ens, rows)
    n = len(point)
    rng = np.random.default_rng(seed)
    base = reps if len(reps) > 1 else np.repeat(reps, 1000, axis=0)
    noisy = base + draw_noise(ens.noise, np.arange(n), len(base), rng)  # each row a new run
    q = [50 * (1 - ens.level), 50 * (1 + ens.level)]
    with np.errstate(invalid="ignore"):
        ci = ens.law.to_loss(np.nanpercentile(reps, q, axis=0)) if len(reps) > 1 else np.full((2, n), np.nan)
        pi = ens.law.to_loss(np.nanpercentile(noisy, q, axis=0))
    return {"loss": ens.law.to_loss(point), "ci": ci, "pi": pi}


# -- targets -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    spec: str  # as the user wrote it
    label: str  # as tables print it
    key: str  # a parameter name, or a key of fit/derived.derived_numbers
    width: float | None = None
    c_ref: float = C_REF
    rows: tuple = ()  # a gap's two rows (the shape's, the uniform model's), as (column, value) pairs
    log: bool = False  # a positive scale (a depth, an optimum): its covariance taken on log T (_joint)

    def values(self, ens: Ensemble, theta: np.ndarray) -> np.ndarray:
        """(B,) the target at each internal parameter vector (nan where it is undefined)."""
        if self.key == "gap":
            return self._gap(ens, theta)
        v = ens.law.natural_batch(np.atleast_2d(theta))
        if self.key in v:
            return np.asarray(v[self.key], dtype=float)
        widths = [self.width] if self.width is not None else []
        d = derived_numbers(ens.law, v, widths, self.c_ref, ens.count)
        if self.key not in d:
            raise bad("--target", self.spec, f"a number the {ens.law.name} law has: {TARGETS_ALLOWED}")
        return np.asarray(d[self.key], dtype=float).reshape(-1)

    def _gap(self, ens: Ensemble, theta: np.ndarray) -> np.ndarray:
        rows = [dict(r) for r in self.rows]
        missing = [c.partition("=")[0] for c in ens.law.columns if c.partition("=")[0] not in rows[0]]
        if missing:
            raise bad(
                "--target",
                self.spec,
                f"gap@N with a value for every column the {ens.law.name} law reads (add ,{missing[0]}=VALUE)",
            )
        with np.errstate(all="ignore"):
            pred = ens.law.evaluate(np.atleast_2d(theta), ens.law.data(_table(ens, rows)))
            return ens.law.to_loss(pred[:, 0]) - ens.law.to_loss(pred[:, 1])


def parse_target(spec: str, law: Law) -> Target:
    """``dcrit@512`` | ``alpha`` | ``W_exponent[@1e21]`` | ``optimum@1e21`` -> Target; BadInput otherwise."""
    s = str(spec).strip()
    head, _, at = s.partition("@")
    if head in law.names and not at:
        return Target(s, head, head)
    if head.lower() == "dcrit":
        if "dcrit" not in law.options:
            raise bad("--target", s, f"a number the {law.name} law has (it has no D_crit): {TARGETS_ALLOWED}")
        w = _number(at, s, "dcrit@WIDTH, e.g. dcrit@512")
        if w < 1:
            raise bad("--target", s, "dcrit@WIDTH with WIDTH >= 1")
        return Target(s, f"D_crit(W={w:g})", f"dcrit[W={int(w)}]", width=float(int(w)), log=True)
    if head.lower() == "gap":
        return _gap_target(s, at, law)
    if head == "optimum" or head in OPTIMA:
        c = _number(at, s, "optimum@C, e.g. optimum@1e21") if at else C_REF
        key = "D_opt" if head == "optimum" else head
        return Target(s, f"{key} at C = {c:.0e}", f"compute_optimal.{key}", c_ref=c, log=True)
    raise bad("--target", s, TARGETS_ALLOWED)


def _gap_target(s: str, at: str, law: Law) -> Target:
    """``gap@N[,COLUMN=VALUE...]``: the law's loss at shape ``shape`` (default ×) minus at uniform."""
    allowed = "gap@N[,COLUMN=VALUE...], e.g. gap@1e9 or gap@1e9,tokens=5e10,shape=diamond"
    if not any(c.startswith("shape=") for c in law.columns):
        raise bad(
            "--target",
            s,
            f"a number the {law.name} law has (it does not read the shape; a law that does: "
            "docs/laws/shape_gap.yaml): " + TARGETS_ALLOWED,
        )
    n_text, *parts = at.split(",")
    n = _number(n_text.strip(), s, allowed)
    row: dict = {"params": n, "tokens": TOKENS_PER_PARAM * n}
    shape = GAP_SHAPE
    for part in parts:
        k, eq, v = (x.strip() for x in part.partition("="))
        if not eq or not k or not v:
            raise bad("--target", s, allowed)
        if k == "shape":
            shape = v
        else:
            row[k] = _number(v, s, allowed)
    if shape == GAP_BASE:
        raise bad("--target", s, f"gap@N,shape=SHAPE with a shape other than {GAP_BASE} (the gap is against it)")
    rows = tuple(tuple({**row, "shape": sh}.items()) for sh in (shape, GAP_BASE))
    label = f"loss gap {shape} - {GAP_BASE} at N = {n:.0e}, T = {row['tokens']:.0e}"
    return Target(s, label, "gap", rows=rows)


def _number(text: str, spec: str, allowed: str) -> float:
    if not re.fullmatch(r"[0-9.eE+]+", text or ""):
        raise bad("--target", spec, allowed)
    try:
        x = float(text)
    except ValueError:
        raise bad("--target", spec, allowed) from None
    if not math.isfinite(x) or x <= 0:
        raise bad("--target", spec, allowed)
    return x


# -- design --------------------------------------------------------------------------------


@dataclass
class Design:
    """The greedy choice and what each pick is expected to leave of the target's interval."""

    target: Target
    width_now: float  # the target's interval width now (percentiles of the replicates)
    sd_now: float
    picks: list[int]  # candidate indices, in order
    width_after: list[float]  # the interval's expected width after each pick (cumulative)
    value: np.ndarray  # per candidate, alone: expected reduction of the interval width per cost unit
    width_alone: np.ndarray  # per candidate, alone: the interval's expected width after it
    cost: np.ndarray
    replicates: int
    outputs: tuple = ()  # a multi-output law's outputs: each pick reveals them all, at its one cost

    @property
    def spent(self) -> float:
        """The picks' cost in all."""
        return float(self.cost[self.picks].sum())


@dataclass(frozen=True)
class Region:
    """A target made of several numbers: the law's log loss at each row of ``rows`` (a region a
    fit must predict, e.g. the large runs nobody can afford yet).  The design then minimises the
    sum of their variances (V-optimality on the region, from the replicates)."""

    rows: tuple  # mappings of the law's input columns
    spec: str = "region"
    label: str = "log loss over the target region"

    def values(self, ens: Ensemble, theta: np.ndarray) -> np.ndarray:
        """(B, K) log losses of the region's rows at each internal parameter vector."""
        return ens.law.evaluate(np.atleast_2d(theta), ens.law.data(_table(ens, list(self.rows))))


def _joint(ens: Ensemble, target, rows) -> tuple[np.ndarray, np.ndarray, int]:
    """(T (B, K), Y (B, M·m) log losses: every output of each of the M runs ``rows``, run-major as
    ``run_rows`` orders them; m = 1 for a law of one output) over the replicates where both are
    finite; robust to a few wild replicates (beyond the 1st-99th percentile of a scalar T they are
    dropped: one replicate on a bound would otherwise set the covariance)."""
    T = target.values(ens, ens.theta)
    T = T.reshape(len(T), -1)
    if getattr(target, "log", False):  # a scale whose replicates span a factor: Gaussian on log T, not on T
        T = np.where(T > 0, np.log(np.where(T > 0, T, 1.0)), np.nan)
    _, Y = log_predictions(ens, run_rows(ens, rows))
    ok = np.isfinite(T).all(axis=1) & np.isfinite(Y).all(axis=1)
    T, Y = T[ok], Y[ok]
    if len(T) >= 20 and T.shape[1] == 1:
        lo, hi = np.percentile(T[:, 0], [1, 99])
        keep = (T[:, 0] >= lo) & (T[:, 0] <= hi)
        T, Y = T[keep], Y[keep]
    return T, Y, int(ok.sum())


def _configs(ens: Ensemble, rows) -> np.ndarray:
    """(M,) one code per distinct configuration of ``rows`` (equal values of every column the law
    reads; a multi-output law's outputs of one run are one configuration)."""
    X = ens.law.data(_table(ens, rows))
    use = run_columns(ens.law)
    cols = np.column_stack([X[c] for c in use]) if use else np.zeros((len(X["_zero"]), 1))
    return np.unique(cols, axis=0, return_inverse=True)[1].reshape(-1)


MIN_REPLICATES = 10  # replicates a design's covariance rests on


def misfit_kernel(ens: Ensemble, rows, extra=None, length: float = MISFIT_LENGTH):
    """(corr among ``rows`` (M, M), corr of ``extra`` rows with them (K, M), among ``extra`` (K, K)):
    the law's misfit correlated between configurations (fit/misfit.py ``misfit_corr``), each column's
    scale and spread the candidates' (``rows``) alone, whatever ``extra`` holds."""
    x = ens.law.data(_table(ens, rows))
    ext = [dict(r) for r in (extra or ())]
    return misfit_corr(ens.law, x, ens.law.data(_table(ens, ext)) if ext else None, length)


DATA_ONLY_DRAWS = 64  # replicates the promise from a prior is averaged over


def _data_only_widths(ens: Ensemble, target, rows, picks: list[int], alone: bool = False) -> list[float]:
    """The target's interval width after each prefix of ``picks`` (``alone``: after each pick alone, the
    dry run's per-run promise), as a fit of the ensemble's own runs (``ens.runs``; none for a prior) and
    those picks alone will report it: the refit's bootstrap knows nothing of a prior, so a promise made
    from one must not lean on it.  Linear-Gaussian about where the truth may be: at each of
    ``DATA_ONLY_DRAWS`` replicates (the point among them), the Fisher information of the runs (the law's
    log-loss gradients by central differences, over a new run's noise covariance) gives Var(T) =
    g' F^-1 g, infinite where the runs leave a direction T depends on undetermined; the promise is the
    median width over the replicates (a hinge the runs do not reach at one replicate may be crossed at
    another)."""
    from statistics import NormalDist

    law = ens.law
    rng = np.random.default_rng(0)
    others = ens.theta[rng.permutation(len(ens.theta))[: DATA_ONLY_DRAWS - 1]] if len(ens.theta) else ens.theta
    thetas = np.vstack([np.asarray(ens.point, dtype=float)[None, :], others])
    free = np.flatnonzero(np.ptp(ens.theta, axis=0) > 0) if len(ens.theta) > 1 else np.arange(thetas.shape[1])
    mine = rows.iloc[list(picks)].to_dict("records") if hasattr(rows, "iloc") else [rows[j] for j in picks]
    m_out = _per_run(ens, mine)  # rows per pick: a multi-output law's run reveals every output
    X = law.data(_table(ens, [*(ens.runs or []), *run_rows(ens, mine)]))
    n0, P, S = len(ens.runs or []), len(free), len(mine)
    z, s2 = NormalDist().inv_cdf(0.5 * (1 + ens.level)), max(ens.new_run_var, 1e-12)
    W = _whitener(ens, n0, 1) if m_out > 1 else np.eye(n0 + 1) / math.sqrt(s2)  # the runs', a new run's block
    widths = np.full((len(thetas), S), np.inf)
    for b, th0 in enumerate(thetas):
        h = 1e-5 * np.maximum(1.0, np.abs(th0[free]))
        TH = np.repeat(th0[None, :], 2 * P, axis=0)
        TH[np.arange(P), free] += h
        TH[P + np.arange(P), free] -= h
        with np.errstate(all="ignore"):
            pred = law.evaluate(TH, X)
            J = (pred[:P] - pred[P:]) / (2 * h[:, None])  # (P, n)
            tv = target.values(ens, TH).reshape(2 * P, -1)
            g = (tv[:P] - tv[P:]) / (2 * h[:, None])  # (P, K)
        if not (np.isfinite(J).all() and np.isfinite(g).all()):
            continue
        J0 = J[:, :n0] @ W[:n0, :n0]  # whitened by each run's noise covariance (its outputs share it)
        Jn = J[:, n0:].reshape(P, S, m_out) @ W[n0:, n0:]
        G = np.einsum("psi,qsi->spq", Jn, Jn)  # (S, P, P): each pick's information
        widths[b] = _info_widths(J0 @ J0.T + (G if alone else np.cumsum(G, axis=0)), g, z)
    return [float(x) for x in np.median(widths, axis=0)]


def _info_widths(F: np.ndarray, g: np.ndarray, z: float) -> np.ndarray:
    """(S,) 2z sqrt(g' F^-1 g / K) per information matrix F (S, P, P); inf where it leaves g (P, K) open."""
    w, V = np.linalg.eigh(F)
    gv = np.einsum("spq,pk->sqk", V, g)  # the target's gradient along each matrix's eigenvectors
    tiny = w <= 1e-9 * np.maximum(w.max(axis=1, keepdims=True), 1e-300)
    open_ = ((np.abs(gv) > 1e-6 * max(float(np.abs(g).max()), 1e-300)) & tiny[:, :, None]).any(axis=(1, 2))
    q = (np.where(tiny[:, :, None], 0.0, gv**2) / np.where(tiny, 1.0, w)[:, :, None]).sum(axis=(1, 2))
    return np.where(open_, np.inf, 2 * z * np.sqrt(q / g.shape[1]))


def _noise_block(ens: Ensemble, m: int, total: float) -> np.ndarray:
    """(m, m) the noise covariance of one run's m outputs, each of variance ``total``: the per-point
    noise on each output alone, the rest the run's own effect, one draw for all its outputs (as
    fit/boot.py draws a run's seed noise)."""
    own = min(float(ens.noise.get("point", 0.0) ** 2), total)
    return (total - own) * np.ones((m, m)) + own * np.eye(m)


def _whitener(ens: Ensemble, n0: int, n_picks: int) -> np.ndarray:
    """(n, n) Σ^(-1/2) of the noise of the ensemble's own runs' rows (``ens.runs``, grouped by their
    ``run``) and of ``n_picks`` new runs of a multi-output law (each its m rows): block diagonal,
    each run's block ``_noise_block`` of the new-run variance."""
    m = len(outputs_of(ens))  # rows per new run
    codes = [str(r.get("run", f"row{i}")) for i, r in enumerate(ens.runs or [])]
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(codes):
        groups.setdefault(c, []).append(i)
    blocks = list(groups.values()) + [list(range(n0 + k * m, n0 + (k + 1) * m)) for k in range(n_picks)]
    n = n0 + n_picks * m
    W = np.zeros((n, n))
    for idx in blocks:
        w, V = np.linalg.eigh(_noise_block(ens, len(idx), max(ens.new_run_var, 1e-12)))
        W[np.ix_(idx, idx)] = (V / np.sqrt(np.maximum(w, 1e-12))) @ V.T
    return W


def check_cost_power(x, name: str) -> None:
    """BadInput naming ``name`` (a flag, or a library argument) unless ``x`` is a number in [0, 1]."""
    if isinstance(x, bool) or not (isinstance(x, (int, float)) and 0 <= x <= 1):
        raise bad(name, x, "a number in [0, 1] (1: value per unit cost, 0: cost ignored)")


def design(
    ens: Ensemble,
    target,
    rows,
    cost,
    budget: float | None = None,
    k: int | None = None,
    cost_power: float = 1.0,
    weights=None,
) -> Design:
    """Greedy choice among ``rows`` (candidates) by expected reduction of ``target``'s variance (the
    sum over a Region's numbers) per unit of ``cost ** cost_power``, until ``budget`` (sum of costs)
    or ``k`` picks; the joint covariance conditioned on each pick before the next.  ``cost_power``
    < 1 tempers the cost in the ranking only (V-optimal designs do so: per unit of cost, many cheap
    runs far from the target can outrank the few that predict it; the budget is always in cost).

    A multi-output law's candidate is one run of one cost that reveals every output at once: its
    value is the target's variance reduction given all its outputs observed together (the Kalman
    update by the vector of its m log losses, their noise one run effect shared by the outputs plus
    each output's own point noise: ``_noise_block``), and a pick is charged its cost once.

    ``weights``: None, or one in [0, 1] a candidate, the weight the fit using its loss gives it (the fit
    made for a target: ``fit/target_fit.locality``): a candidate of weight w has its seed noise over w
    (the weighted fit's view of it), so a run of weight 0 is worth nothing and one of small weight little."""
    check_cost_power(cost_power, "design(cost_power=)")  # dw suggest checks it first, naming --cost-power
    cost = np.asarray(cost, dtype=float)
    rank = np.maximum(cost, 1e-12) ** cost_power
    wt = design_weights(weights, len(cost))
    inv_w = 1.0 / np.maximum(wt, 1e-12)  # a candidate's noise variance, in units of an unweighted run's
    m = _per_run(ens, rows)  # outputs a run reveals (its columns of Y: run j's at j*m ... j*m + m - 1)
    outs = tuple(outputs_of(ens)) if m > 1 else ()
    long = run_rows(ens, rows)
    T, Y, used = _joint(ens, target, rows)
    if len(T) < MIN_REPLICATES:  # said without a flag: design() is called from Python too (benchmarks)
        raise BadInput(
            f"cannot design for {target.spec}: {len(T)} of the fit's {len(ens.theta)} bootstrap replicates "
            f"define it, and a design needs at least {MIN_REPLICATES} (refit with more bootstrap replicates, "
            "run_fit(bootstrap=); or choose another target)"
        )
    K, M = T.shape[1], Y.shape[1] // m
    if len(cost) != M:  # one cost per run, whatever it reveals
        raise ValueError(f"design: {len(cost)} costs for {M} candidate runs (one cost per run)")
    C = np.cov(np.column_stack([T, Y]), rowvar=False)
    # A measured loss is the law's plus the misfit at its configuration (shared by replicates: the
    # same law inputs, another seed) plus fresh seed and point noise (s2): the misfit enters the
    # covariance of the losses, so a second seed of a configuration teaches only what the seeds
    # average away, and a new configuration what the law's misfit allows.
    cfg = _configs(ens, long)
    C[K:, K:] += ens.misfit_var * (cfg[:, None] == cfg[None, :])
    s2 = ens.seed_var
    noise = _noise_block(ens, m, s2)  # a run's outputs: one seed effect, each its own point noise
    # What a run teaches (the ranking): the misfit correlated between neighbouring configurations, not
    # only between seeds of one (misfit_kernel): many cheap runs in one corner share it, so their value
    # saturates at what the law's misfit allows instead of adding up; and for a region of runs the
    # misfit there is part of what is predicted, learned only from runs near it.  What the refit will
    # report (the promise) keeps the refit's own model, each run's residual its own (C).
    R = C.copy()
    if ens.misfit_var > 0:
        kxx, kex, kee = misfit_kernel(ens, long, getattr(target, "rows", None) if isinstance(target, Region) else None)
        R[K:, K:] += ens.misfit_var * (kxx - (cfg[:, None] == cfg[None, :]))
        if isinstance(target, Region):
            R[:K, :K] += ens.misfit_var * kee
            R[:K, K:] += ens.misfit_var * kex
            R[K:, :K] += ens.misfit_var * kex.T
    q = [50 * (1 - ens.level), 50 * (1 + ens.level)]
    # The interval now is the one the fit reports: percentiles of every replicate that defines the
    # target (the 1st-99th percentile trim above is for the covariance only; measured from the
    # trimmed replicates it was 5-25% narrower, and every promise with it).
    T_all = target.values(ens, ens.theta)
    T_all = T_all.reshape(len(T_all), -1)
    T_all = T_all[np.isfinite(T_all).all(axis=1)]
    lo, hi = np.percentile(T_all, q, axis=0)
    width_now = float(np.mean(hi - lo))
    var_now = float(np.trace(C[:K, :K]))
    sd_now = math.sqrt(max(var_now / K, 0.0))
    scale = width_now / sd_now if sd_now > 0 else 0.0  # interval width per standard deviation

    def drop(Cm, j):  # expected fall of the target's summed variance once candidate j is measured
        if wt[j] == 0:  # the fit will not use its loss
            return 0.0
        if m == 1:
            return float((Cm[:K, K + j] ** 2).sum() / (Cm[K + j, K + j] + s2 * inv_w[j]))
        b = K + j * m + np.arange(m)  # all its outputs together: trace(c S^-1 c')
        c = Cm[:K, b]
        return float((c * (np.linalg.pinv(Cm[np.ix_(b, b)] + noise * inv_w[j], hermitian=True) @ c.T).T).sum())

    def condition(Cm, j):  # the covariance once candidate j's outputs are measured
        if m == 1:
            c = Cm[:, K + j].copy()
            Cm -= np.outer(c, c) / (Cm[K + j, K + j] + s2 * inv_w[j])
            return
        b = K + j * m + np.arange(m)
        c = Cm[:, b].copy()
        Cm -= c @ np.linalg.pinv(Cm[np.ix_(b, b)] + noise * inv_w[j], hermitian=True) @ c.T

    def width(v):
        return scale * math.sqrt(max(v / K, 0.0))

    width_alone = np.array([width(var_now - drop(C, j)) for j in range(M)])
    r_now = float(np.trace(R[:K, :K]))
    value = np.array([width(var_now) * (1 - math.sqrt(max(1 - drop(R, j) / r_now, 0.0))) for j in range(M)])
    value = value / rank if r_now > 0 else np.zeros(M)
    picks, widths, spent, var = [], [], 0.0, var_now
    free = np.ones(M, dtype=bool)
    while free.any() and (k is None or len(picks) < k):
        gain = np.full(M, -np.inf)
        for j in np.flatnonzero(free & (wt > 0)):  # a run of weight 0 is not worth its cost
            if budget is None or spent + cost[j] <= budget * (1 + 1e-9):
                gain[j] = drop(R, j) / rank[j]
        j = int(np.argmax(gain))
        if not np.isfinite(gain[j]):
            break
        picks.append(j)
        spent += cost[j]
        free[j] = False
        for Cm in (C, R):  # condition every covariance on the pick's measured loss (every output of it)
            condition(Cm, j)
        var = float(np.trace(C[:K, :K]))
        widths.append(width(var))
    if not ens.from_fit:  # the refit forgets the prior: promise what the runs alone determine
        width_alone = np.array(_data_only_widths(ens, target, rows, range(M), alone=True))
        widths = _data_only_widths(ens, target, rows, picks) if picks else widths
    return Design(target, width_now, sd_now, picks, widths, value, width_alone, cost, used, outs)
