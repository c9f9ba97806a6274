"""A planted world: a law with known parameters and a noise model (docs/science.md §5).

``World`` is everything that decides a simulated run's losses: the law (any of
fit/laws.py, both D_crit forms, with or without E), its parameters, which
parameter count is its N (fit/derived.py), and the noise:

``sigma``        seed-to-seed noise: one Gaussian draw on log loss per run, shared by
                 all of its token budgets (default 0.005, ≈ 0.017 nats at the
                 depth_delusion grid's losses of ~3.4: inside the 0.01–0.03 nats a
                 seed changes a run's loss by);
``point``        an independent draw per token budget (checkpoint-to-checkpoint
                 evaluation noise; default sigma / 5);
``hetero``       σ of a run scales as (N / N_median)^(−hetero): smaller models noisier;
``outliers``     the fraction of runs whose loss is multiplied by exp(``outlier_size``)
                 (a bad run: a loss spike the fit should not follow).

The default parameters are fit/prior.py's ``PUBLISHED`` (near the papers' own fits; their
sources are stated there); ``--set NAME=VALUE`` overrides any parameter.

A tuned sweep (sweep file ``tune: {optim.lr: ...}``) also plants a learning-rate optimum
(``LrWorld``): a run at learning rate lr has the law's loss times
exp(c·(log10(lr/lr*(N)))²), lr*(N) = lr_mid·(N/N_mid)^(−e), N the run's total parameter count,
lr_mid and N_mid the geometric middles of the sweep's tuned learning rates and of its N range,
c = ``lr_curvature`` (0.04: 1% loss at half a decade off, as tests/test_tuning.py plants) and
e = ``lr_exponent`` (0.25).  So each group's best rate is the one nearest its lr* (ties aside).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from depthwidth.core.errors import BadInput, bad
from depthwidth.fit.derived import check_convention
from depthwidth.fit.laws import Law, get_law, label, parse_values
from depthwidth.fit.prior import PUBLISHED


@dataclass(frozen=True)
class Noise:
    sigma: float = 0.005
    point: float | None = None  # None: sigma / 5
    hetero: float = 0.0
    outliers: float = 0.0
    outlier_size: float = 0.1

    def checked(self) -> "Noise":
        for k, opt in (("sigma", "--noise"), ("hetero", "--hetero"), ("outlier_size", "--outlier-size")):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise bad(opt, v, "a finite number >= 0")
        if self.point is not None and not (math.isfinite(self.point) and self.point >= 0):
            raise bad("--point-noise", self.point, "a finite number >= 0")
        if not 0 <= self.outliers <= 1:
            raise bad("--outliers", self.outliers, "a fraction of runs in [0, 1]")
        return self

    @property
    def per_point(self) -> float:
        return self.sigma / 5 if self.point is None else self.point


@dataclass(frozen=True)
class World:
    law: Law
    values: dict
    convention: str
    noise: Noise = field(default_factory=Noise)

    @property
    def label(self) -> str:
        return label(self.law)

    def to_dict(self) -> dict:
        return {
            "law": self.law.name,
            "label": self.label,
            "options": dict(self.law.options),
            "formula": self.law.formula,
            "params": dict(self.values),
            "n_convention": self.convention,
            "noise": {**asdict(self.noise), "point": self.noise.per_point},
        }


LR_KEY = "optim.lr"  # the tuned setting a planted optimum is for


@dataclass(frozen=True)
class LrWorld:
    """A tuned sweep's planted learning-rate optimum: log-loss penalty c·(log10(lr/lr*))²,
    lr* = lr_mid·(N/N_mid)^(−exponent) (module docstring)."""

    curvature: float
    exponent: float
    lr_mid: float
    n_mid: float

    @classmethod
    def of(cls, lrs, ns, curvature: float = 0.04, exponent: float = 0.25) -> "LrWorld":
        """Centred on the geometric middles of the tuned rates ``lrs`` and the sizes ``ns``."""
        check_lr(curvature, exponent)
        mid = lambda xs: math.sqrt(float(np.min(xs)) * float(np.max(xs)))  # noqa: E731
        return cls(float(curvature), float(exponent), mid(lrs), mid(ns))

    def optimum(self, n):
        return self.lr_mid * (np.asarray(n, dtype=float) / self.n_mid) ** (-self.exponent)

    def factor(self, lr, n):
        """The loss factor exp(c·(log10(lr/lr*(N)))²) of runs at ``lr`` with N = ``n``."""
        return np.exp(self.curvature * np.log10(np.asarray(lr, dtype=float) / self.optimum(n)) ** 2)

    def to_dict(self) -> dict:
        return {
            "key": LR_KEY,
            "formula": "loss × exp(c·(log10(lr/lr*))²), lr* = lr_mid·(N/N_mid)^(−e), N: total parameters",
            "c": self.curvature,
            "e": self.exponent,
            "lr_mid": self.lr_mid,
            "N_mid": self.n_mid,
        }


def check_lr(curvature, exponent) -> None:
    for v, opt, what in ((curvature, "--lr-curvature", "a finite number >= 0"), (exponent, "--lr-exponent", "")):
        if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and (v >= 0 or not what)):
            raise bad(opt, v, what or "a finite number")


def world(
    law: str = "depth-delusion",
    *,
    dcrit: str = "log",
    irreducible: bool = False,
    set_values=None,
    n_convention: str | None = None,
    noise: Noise | None = None,
) -> World:
    """The planted world: the law's ``PUBLISHED`` parameters, overridden by ``set_values`` ("k=v,...")."""
    lw = get_law(law, dcrit=dcrit, irreducible=irreducible)
    conv = check_convention(n_convention, lw.name)
    values = dict(PUBLISHED[label(lw)])
    values.update(parse_values(set_values, lw, "--set"))
    missing = [n for n in lw.names if n not in values]
    if missing:  # pragma: no cover - PUBLISHED names every parameter
        raise BadInput(f"no planted value for {', '.join(missing)}")
    return World(lw, {n: values[n] for n in lw.names}, conv, (noise or Noise()).checked())


def losses(w: World, rows: dict, run_index: np.ndarray, seed: int) -> np.ndarray:
    """Planted losses for ``rows`` (columns the law reads, one row per (run, budget) point),
    ``run_index`` giving each row's run (0..R-1); deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    clean = w.law.predict(w.values, {**rows, "loss": np.ones(len(run_index))})
    R = int(run_index.max()) + 1 if len(run_index) else 0
    nz = w.noise
    sig = np.full(R, nz.sigma)
    if nz.hetero and "params" in rows:
        n_run = np.zeros(R)
        n_run[run_index] = np.asarray(rows["params"], dtype=float)
        sig = sig * (n_run / np.median(n_run)) ** (-nz.hetero)
    run_eps = rng.normal(0.0, 1.0, R) * sig
    spike = (rng.random(R) < nz.outliers) * nz.outlier_size
    point_eps = rng.normal(0.0, nz.per_point, len(run_index))
    return clean * np.exp(run_eps[run_index] + spike[run_index] + point_eps)


def gradient_profile(w: World, depth: int, width: float, rng) -> list[float] | None:
    """Per-layer gradient norms (bottom first) decaying from the top with the planted D_crit:
    ||g_l|| = exp(−(D − l) / τ), τ = D_crit(W) − 1 (D_crit is a depth: fit/analyses/gradient_persistence.py), 2% noise.
    None for a law without D_crit."""
    dc = w.law.dcrit(w.values, [width])
    if dc is None:
        return None
    tau = max(float(dc[0]) - 1.0, 1e-3)
    dist = (depth - 1) - np.arange(depth)
    return [float(x) for x in np.exp(-dist / tau + rng.normal(0.0, 0.02, depth))]
