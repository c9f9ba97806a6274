"""The law's misfit between configurations: the coordinates in which it is correlated and its
correlation (a Kennedy-O'Hagan discrepancy: a law wrong at one configuration is wrong alike at its
neighbours).  fit/predict.py's ``misfit_kernel`` (the design's ranking) and fit/target_fit.py (the fit
made for a target) measure distance in these coordinates.

Each run column is on a log scale where the candidates' values are all positive, and the scale is
the candidates' alone: the kernel is a covariance function of the candidates, fixed before any row
is asked about, so the rows a design must predict (a Region's target rows) never change the
candidates' coordinates nor their correlations.  An extra row outside a log column's domain (a value
<= 0 there) lies infinitely far from every candidate: its misfit is learned from none of them.

No pandas, no torch.
"""

from __future__ import annotations

import numpy as np

from depthwidth.fit.laws import Law
from depthwidth.fit.userlaw import OUTPUT, outputs

MISFIT_LENGTH = 1.0  # the misfit's correlation length, in standard deviations of the candidates' log inputs
MISFIT_LR_CRITICAL = 2.71  # 5%: half chi2(0), half chi2(1), a variance share tested on its boundary
SHARE_GRID = np.linspace(0.0, 0.99, 100)  # the misfit share l the likelihood is maximised over
MIN_SHARE_DF = 10  # residual degrees of freedom (runs less free parameters) below which no share is estimated


def run_columns(law: Law) -> list[str]:
    """The columns ``law`` reads that describe a run: all of them but a multi-output law's output
    indicators (a run's outputs share its configuration, and the law's misfit there)."""
    if not outputs(law):
        return list(law.columns)
    return [c for c in law.columns if c.partition("=")[0] != OUTPUT]


def _raw(law: Law, X: dict) -> np.ndarray:
    """(n, d) the run columns of ``X`` (``law.data`` of a table) as they are."""
    cols = [np.asarray(X[c], dtype=float) for c in run_columns(law)]
    return np.column_stack(cols) if cols else np.zeros((len(X["_zero"]), 0))


def log_scale(law: Law, X: dict) -> np.ndarray:
    """(d,) which run columns of ``X`` are on a log scale: those whose values are all positive."""
    return (_raw(law, X) > 0).all(axis=0)


def law_coords(law: Law, X: dict, log: np.ndarray | None = None) -> np.ndarray:
    """(n, d) the run columns of ``X`` (``law.data`` of a table), each on a log scale where all its
    values are positive, or where ``log`` (another table's ``log_scale``) says: the space in which the
    law's misfit is correlated.  A value <= 0 in a log column is -inf or nan there."""
    x = _raw(law, X)
    log = log_scale(law, X) if log is None else np.asarray(log, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(log[None, :], np.log(x), x) if x.size else x


def misfit_corr(law: Law, X: dict, extra: dict | None = None, length: float = MISFIT_LENGTH):
    """(corr among the candidates ``X`` (M, M), corr of the ``extra`` rows with them (K, M), among
    ``extra`` (K, K)), both ``law.data`` of a table: exp(-d^2 / 2), d the distance of their coordinates
    (``law_coords`` on the candidates' scale) in units of ``length`` standard deviations of the
    candidates'.  Identical configurations (another seed) correlate 1."""
    log = log_scale(law, X)
    raw_c = _raw(law, X)
    raw_e = _raw(law, extra) if extra is not None else np.zeros((0, raw_c.shape[1]))
    xc, xe = law_coords(law, X, log), law_coords(law, extra, log) if extra is not None else raw_e
    sd = xc.std(axis=0) if len(xc) > 1 else np.zeros(xc.shape[1])
    use = np.isfinite(sd) & (sd > 0)
    zc, ze = xc[:, use] / (length * sd[use]), xe[:, use] / (length * sd[use])

    def corr(a, b, ra, rb):
        with np.errstate(invalid="ignore"):
            diff = a[:, None, :] - b[None, :, :]
        diff = np.where(ra[:, None, :] == rb[None, :, :], 0.0, diff)  # equal values: no distance
        d2 = np.where(np.isfinite(diff), diff, np.inf) ** 2  # a value outside the scale's domain: infinitely far
        return np.exp(-0.5 * d2.sum(axis=2))

    rc, re = raw_c[:, use], raw_e[:, use]
    return corr(zc, zc, rc, rc), corr(ze, zc, re, rc), corr(ze, ze, re, re)


def misfit_test(resid: np.ndarray, corr: np.ndarray) -> tuple[float, float]:
    """(likelihood ratio, estimated share l): residuals ~ N(0, v((1 - l)I + l corr)), v profiled out,
    l on ``SHARE_GRID``, against l = 0.  One eigendecomposition of ``corr`` serves every l: the
    covariance's eigenvalues are l·lambda + 1 - l on the same eigenvectors."""
    n = len(resid)
    lam, Q = np.linalg.eigh(corr)
    lam = np.clip(lam, 0.0, None)  # a correlation matrix: any negative eigenvalue is rounding
    r2 = (Q.T @ resid) ** 2
    eig = SHARE_GRID[:, None] * lam[None, :] + (1.0 - SHARE_GRID[:, None])  # (shares, n), >= 0.01
    ll = -0.5 * n * np.log(np.maximum((r2 / eig).sum(axis=1) / n, 1e-300)) - 0.5 * np.log(eig).sum(axis=1)
    best = int(np.argmax(ll))
    return 2.0 * float(ll[best] - ll[0]), float(SHARE_GRID[best])


def misfit_share(law: Law, X: dict, r: np.ndarray) -> float:
    """The share of the runs' residual variance that is the law's misfit: ``misfit_test``'s estimate
    on ``r`` (one residual a run, log loss) under ``misfit_corr`` among the runs ``X`` (``law.data``,
    one row a run), where its likelihood ratio shows a misfit at 5%, else 0.

    Without replicated seeds a residual is seed noise or misfit and only their pattern tells which:
    seed noise is independent from run to run, the misfit is shared by neighbouring configurations
    (the design's own model of it).  On real tables (ScaleBench's farseer and data_constrained, 60 to
    404 runs) the share is 0.97-1.00; on the same inputs with the law's curve plus independent noise,
    0.00 (docs/design.md, "Seed noise or misfit")."""
    lr, share = misfit_test(np.asarray(r, dtype=float), misfit_corr(law, X)[0])
    return share if lr > MISFIT_LR_CRITICAL else 0.0
