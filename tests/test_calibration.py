"""Coverage smoke test: dw fit's 95% intervals on planted depth_delusion grids (the full measurement,
200 sweeps a world, is benchmarks/bench_calibration.py; its figures are in README "Coverage").

16 planted sweeps of the 30-run grid, each simulated (dw simulate's library call), fitted with the
real dw fit and compared with the planted truth.  Deterministic (seeded): no flake, but wide enough
(13 of 16 = 81%) that an interval method off by a lot fails it."""

import pytest

from benchmarks.bench_calibration import coverage

HEADLINE = (
    "alpha",
    "delta",
    "kappa",
    "dcrit[W=512]",
    "dcrit[GPT-3]",
    "compute_optimal.N_exponent",
    "compute_optimal.W_exponent",
    "compute_optimal.W_opt",
    "compute_optimal.D_opt",
)


@pytest.fixture(scope="module")
def cov():
    return coverage(worlds=("dd-log",), sweeps=16, B=60, workers=1, holdout=3, max_starts=300)["dd-log"]


def test_planted_grids_are_covered_near_nominal(cov):
    nums = cov["numbers"]
    assert cov["sweeps"] == 16 and cov["converged_share"] > 0.9
    for k in HEADLINE:
        assert nums[k]["total"] == 16 and nums[k]["covered"] >= 13, (k, nums[k])
    pooled = sum(d["covered"] for d in nums.values()) / sum(d["total"] for d in nums.values())
    assert 0.85 <= pooled
    assert cov["holdout"]["points"] == 48 and cov["holdout"]["coverage"] >= 0.8
