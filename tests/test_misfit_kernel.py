"""The misfit kernel's coordinates (fit/predict.py ``misfit_kernel``): each column's scale (log where
its values are all positive) is the candidates', so the rows a design is asked to predict (a Region's
target rows) never change the candidates' coordinates nor their correlations (review of 2026-12-05:
the scale was decided on the candidates and the extra rows together, so one target row at 0 in a
column turned that column linear for every candidate)."""

import numpy as np

from depthwidth.fit.laws import get_law
from depthwidth.fit.predict import misfit_kernel
from depthwidth.fit.prior import prior


def _rows():
    n = np.geomspace(1e7, 1e9, 6)
    return [{"params": float(p), "tokens": float(20 * p * f)} for p in n for f in (0.5, 2.0)]


def test_extra_rows_leave_the_candidates_correlations_unchanged():
    ens = prior(get_law("chinchilla"), "published")
    rows = _rows()
    alone, _, _ = misfit_kernel(ens, rows)
    for extra in (
        [{"params": 1e10, "tokens": 2e11}],  # an ordinary target row beyond the candidates
        [{"params": 1e10, "tokens": 0.0}, {"params": 3e9, "tokens": 6e10}],  # one at 0 in a log column
        [{"params": -1.0, "tokens": 2e11}],  # one below 0
    ):
        kxx, kex, kee = misfit_kernel(ens, rows, extra)
        assert np.array_equal(kxx, alone), extra  # the candidates' coordinates are theirs alone
        assert kex.shape == (len(extra), len(rows)) and kee.shape == (len(extra), len(extra))
        assert np.isfinite(kex).all() and np.isfinite(kee).all()
        assert np.allclose(np.diag(kee), 1.0)
    # a row outside the log scale's domain is infinitely far: its misfit is learned from no candidate
    _, kex, kee = misfit_kernel(ens, rows, [{"params": 1e10, "tokens": 0.0}, {"params": 3e9, "tokens": 6e10}])
    assert (kex[0] == 0).all() and (kex[1] > 0).any() and kee[0, 1] == 0
