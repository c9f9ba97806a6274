"""``dw fit --sensitivity``: how far each number moves under reasonable fitting choices.

100 bootstrap replicates per fit: the flag compares spreads with the width of
the 95% interval, whose percentiles need about that many.
"""

import pytest

from depthwidth.fit.laws import get_law
from depthwidth.fit.pipeline import run_fit
from depthwidth.fit.analyses.sensitivity import choices
from tests.planted import PLANTED, planted_table

CHIN = get_law("chinchilla")
NX = "compute_optimal.N_exponent"


def _fit(df, sensitivity=True, bootstrap=100, **kw):
    return run_fit(
        runs=df, law="chinchilla", bootstrap=bootstrap, max_starts=100, sensitivity=sensitivity, write=False, **kw
    )


def _nx(res):
    return res["derived"]["compute_optimal"]["N_exponent"]


@pytest.fixture(scope="module")
def clean():
    # run-to-run noise (σ 0.01) dominates the point noise (σ 0.002), as for real
    # checkpoints of one run: the first and the last budget of a run share its offset
    return planted_table(CHIN, PLANTED["chinchilla"], kind="chinchilla", noise=0.002, run_noise=0.01, seed=3)


@pytest.fixture(scope="module")
def clean_fit(clean):
    return _fit(clean)


def test_clean_table_small_spread_nothing_flagged(clean_fit):
    s = clean_fit["sensitivity"]
    keys = [r["key"] for r in s["choices"]]
    assert keys == [
        "baseline",
        "huber_delta=1e-4",
        "huber_delta=1e-2",
        "half_grid",
        "no_embeddings",
        "drop_5_highest",
        "first_budget",
        "last_budget",
    ]
    by = {r["key"]: r for r in s["choices"]}
    assert "no params_non_embedding column" in by["no_embeddings"]["skipped"]  # no stand-in for the count
    assert by["drop_5_highest"]["n"] == 235 and by["first_budget"]["n"] == 80 == by["last_budget"]["n"]
    assert s["flagged"] == []
    for k, v in s["numbers"].items():
        assert set(v["values"]) == set(keys) - {"no_embeddings"}
        if v["derived"]:  # measured: N_exponent spread 0.024 against an interval 0.082 wide
            assert v["spread"] < 0.5 * v["ci_width"], k
    assert s["numbers"]["alpha"]["values"]["half_grid"] == pytest.approx(
        s["numbers"]["alpha"]["values"]["baseline"], abs=1e-6
    )


def test_gross_outlier_dropping_moves_the_estimate_back(clean, clean_fit):
    # Huber δ = 1e-3 already bounds one point's pull: a 10x loss changes nothing.
    i = int(clean["loss"].idxmax())
    dirty = clean.copy()
    dirty.loc[i, "loss"] *= 10
    assert _nx(_fit(dirty, sensitivity=False)) == pytest.approx(_nx(clean_fit), abs=1e-3)
    # A near-least-squares fit (δ = 1) is pulled far off; dropping the highest-loss
    # points, or any of the grid's robust δ, brings the estimate back.
    # (the run bootstrap here: its widening by the outlier is what the drop-highest interval is for)
    ls_clean = _fit(clean, sensitivity=False, delta=1.0, resample="runs")
    ls_dirty = _fit(dirty, delta=1.0, resample="runs")
    truth = _nx(ls_clean)
    v = ls_dirty["sensitivity"]["numbers"][NX]
    assert abs(v["values"]["baseline"] - truth) > 0.1  # measured 0.535 -> 0.752
    assert abs(v["values"]["drop_5_highest"] - truth) < 0.005
    assert abs(v["values"]["huber_delta=1e-3"] - _nx(clean_fit)) < 0.005
    assert v["spread"] > 0.1
    # The run bootstrap has the outlier's run in ~63% of its replicates, so the baseline's
    # own interval widens by the pull itself; the fit without the highest-loss points,
    # bootstrapped alike, keeps the clean width, and against it the spread is flagged.
    lo, hi = ls_clean["derived"]["compute_optimal"]["ci"]["N_exponent"]
    clean_width = hi - lo
    assert v["ci_width"] > 4 * clean_width and v["ci_width"] > v["spread"]  # the baseline's own would hide it
    assert v["ci_drop_width"] == pytest.approx(clean_width, rel=0.5)
    assert v["compared_width"] == v["ci_drop_width"] < v["spread"]
    assert v["flagged"] and NX in ls_dirty["sensitivity"]["flagged"] and v["farthest"] is not None


def test_counting_embeddings_moves_the_exponent_beyond_its_interval_and_is_flagged():
    # Planted on non-embedding N = 12·D·W²; the table's params add an untied
    # embedding and head, 2·V·W (V = 50257), which dominate the small models.
    df = planted_table(CHIN, PLANTED["chinchilla"], kind="shapes", noise=0.002, run_noise=0.01, seed=3)
    truth = _nx(_fit(df, sensitivity=False, bootstrap=0))
    df["params_non_embedding"] = df["params"]
    df["params"] = df["params"] + 2 * 50257 * df["width"]
    s = _fit(df)["sensitivity"]
    v = s["numbers"][NX]
    assert v["values"]["no_embeddings"] == pytest.approx(truth, abs=1e-3)  # measured 0.510 both
    assert abs(v["values"]["baseline"] - truth) > 0.1  # measured 0.349
    assert NX in s["flagged"] and v["spread"] > v["ci_width"]
    assert v["farthest"] in set(v["values"]) - {"baseline"}  # measured: first_budget (0.165), then no_embeddings


def test_choices_that_do_not_apply_say_why():
    dd = get_law("depth-delusion")
    df = planted_table(dd, PLANTED["depth-delusion[log]"], seed=1)
    by = {c["key"]: c for c in choices(df, dd, 1e-3, 100)}
    assert by["no_embeddings"]["skipped"] == "no params_non_embedding column at every row (map one with --columns)"
    same = df.assign(params_non_embedding=df["params"])
    by = {c["key"]: c for c in choices(same, dd, 1e-3, 100)}
    assert by["no_embeddings"]["skipped"] == "params_non_embedding equals the fitted N at every row"
    by = {c["key"]: c for c in choices(df.assign(params_total=df["params"]), dd, 1e-3, 100, convention="12DW2")}
    assert by["with_embeddings"]["skipped"] == "params_total equals the fitted N at every row"
    assert by["half_grid"]["max_starts"] == 50 and by["baseline"]["max_starts"] == 100
    wd = get_law("width-depth")
    by = {c["key"]: c for c in choices(df, wd, 1e-2, 100)}
    assert by["no_embeddings"]["skipped"] == "width-depth does not read params"
    assert "huber_delta=1e-2" not in by and {"huber_delta=1e-4", "huber_delta=1e-3"} <= set(by)
    one = df.groupby("run").head(1)
    by = {c["key"]: c for c in choices(one, dd, 1e-3, 100)}
    assert by["first_budget"]["skipped"] == "every run has a single token budget"


def test_without_embeddings_uses_the_table_count_never_12DW2():
    """A SwiGLU model's blocks hold 16·D·W² (4 attention + 3 MLP matrices at 4·W), not 12·D·W²:
    the choice refits on the table's own params_non_embedding, or is skipped without it.
    (Before: silently N = 12·D·W², a 4/3 error for SwiGLU.)"""
    df = planted_table(CHIN, PLANTED["chinchilla"], kind="shapes", noise=0.002, seed=5)
    df["params_non_embedding"] = 16.0 / 12.0 * df["params"]
    df["params"] = df["params_non_embedding"] + 2 * 100263 * df["width"]
    by = {c["key"]: c for c in choices(df, CHIN, 1e-3, 50)}
    assert by["no_embeddings"]["table"]["params"].tolist() == df["params_non_embedding"].tolist()
    assert by["no_embeddings"]["convention"] == "non-embedding"
    by = {c["key"]: c for c in choices(df.drop(columns="params_non_embedding"), CHIN, 1e-3, 50)}
    assert "skipped" in by["no_embeddings"] and "table" not in by["no_embeddings"]


def test_without_bootstrap_no_flags_and_a_note(clean):
    s = run_fit(runs=clean, law="chinchilla", bootstrap=0, max_starts=50, sensitivity=True, write=False)["sensitivity"]
    assert s["flagged"] == [] and "no bootstrap intervals" in s["note"]
    assert all(v["ci_width"] is None for v in s["numbers"].values())
