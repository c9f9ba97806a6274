"""Laws as data: names, parameters, grids, formulas, analytic Jacobians, pins."""

import math

import numpy as np
import pandas as pd
import pytest

from depthwidth.core.errors import BadInput
from tests.planted import PLANTED, planted_table
from depthwidth.fit.laws import LAW_NAMES, get_law, parse_pins


def _table(n=40, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.choice([64, 128, 256, 512, 1024], n).astype(float)
    d = rng.choice([2, 4, 8, 16, 32, 64], n).astype(float)
    N = 12 * d * w * w
    return pd.DataFrame({"params": N, "tokens": N * rng.uniform(1, 50, n), "depth": d, "width": w, "loss": 3.0})


def test_registry_and_parameter_names():
    assert set(LAW_NAMES) == {"chinchilla", "depth-delusion", "width-depth"}
    assert get_law("chinchilla").names == ["E", "A", "B", "alpha", "beta"]
    assert get_law("depth-delusion").names == ["A", "alpha", "B", "delta", "gamma", "mu", "kappa"]
    assert get_law("depth-delusion", dcrit="power").names == ["A", "alpha", "B", "delta", "gamma", "mu", "c", "p"]
    assert get_law("depth-delusion", irreducible=True).names[0] == "E"
    assert get_law("width-depth").names == ["E", "A_w", "a_w", "A_d", "a_d", "B", "beta"]
    assert get_law("chinchilla").columns == ("params", "tokens")
    assert set(get_law("depth-delusion").columns) == {"params", "tokens", "depth", "width"}
    assert set(get_law("width-depth").columns) == {"width", "depth", "tokens"}
    with pytest.raises(BadInput, match="--law"):
        get_law("kaplan")
    with pytest.raises(BadInput, match="--dcrit"):
        get_law("depth-delusion", dcrit="linear")


def test_chinchilla_grid_is_hoffmanns_4500_points():
    law = get_law("chinchilla")
    g = law.grid()
    assert g.shape == (4500, 5)
    col = {n: sorted(set(np.round(g[:, i], 9))) for i, n in enumerate(law.names)}
    assert col["alpha"] == col["beta"] == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert col["E"] == [-1.0, -0.5, 0.0, 0.5, 1.0]  # e = log E
    assert col["A"] == col["B"] == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0]  # a = log A
    assert len({tuple(r) for r in g}) == 4500
    # the other laws have grids of comparable size, capped and reproducible
    for lw in (get_law("depth-delusion"), get_law("depth-delusion", "power", True), get_law("width-depth")):
        gg = lw.grid(max_starts=4500)
        assert 1000 <= len(gg) <= 4500
        assert np.array_equal(gg, lw.grid(max_starts=4500))


@pytest.mark.parametrize(
    "name,dcrit,irr",
    [
        ("chinchilla", "log", False),
        ("width-depth", "log", False),
        ("depth-delusion", "log", False),
        ("depth-delusion", "power", True),
    ],
)
def test_prediction_matches_the_closed_form(name, dcrit, irr):
    law = get_law(name, dcrit=dcrit, irreducible=irr)
    df = _table()
    v = {
        "E": 1.7,
        "A": 400.0,
        "B": 2000.0,
        "alpha": 0.3,
        "beta": 0.35,
        "delta": 0.35,
        "gamma": 0.8,
        "mu": 0.3,
        "kappa": 2.43,
        "c": 0.5,
        "p": 0.44,
        "A_w": 30.0,
        "a_w": 0.5,
        "A_d": 2.0,
        "a_d": 0.6,
    }
    v = {k: v[k] for k in law.names}
    N, T, D, W = (df[c].to_numpy() for c in ("params", "tokens", "depth", "width"))
    if name == "chinchilla":
        want = v["E"] + v["A"] / N ** v["alpha"] + v["B"] / T ** v["beta"]
    elif name == "width-depth":
        want = v["E"] + v["A_w"] / W ** v["a_w"] + v["A_d"] / D ** v["a_d"] + v["B"] / T ** v["beta"]
    else:
        dc = v["kappa"] * np.log(W) if dcrit == "log" else v["c"] * W ** v["p"]
        want = (
            v["A"] / N ** v["alpha"]
            + v["B"] / T ** v["delta"]
            + v["gamma"] * W ** (-v["mu"]) * np.maximum(0, (D - dc) / dc)
            + v.get("E", 0.0)
        )
    assert np.allclose(law.predict(v, df), want, rtol=1e-12)
    if "dcrit" in law.options:
        # the penalty is exactly zero up to D_crit: below it only the capacity and data terms remain
        below = D <= dc
        assert below.any() and (~below).any()
        base = v["A"] / N ** v["alpha"] + v["B"] / T ** v["delta"] + v.get("E", 0.0)
        assert np.allclose(law.predict(v, df)[below], base[below], rtol=1e-12)


@pytest.mark.parametrize(
    "key,dcrit,irr",
    [
        ("chinchilla", None, False),
        ("width-depth", None, False),
        ("depth-delusion[log]", "log", True),
        ("depth-delusion[power]", "power", False),
    ],
)
@pytest.mark.parametrize("smooth", [0.0, 0.05])
def test_analytic_jacobian_matches_finite_differences(key, dcrit, irr, smooth):
    name = key.split("[")[0]
    law = get_law(name, dcrit=dcrit or "log", irreducible=irr)
    vals = dict(PLANTED[key], E=1.5)
    df = planted_table(law, {k: vals[k] for k in law.names})
    X = law.data(df)
    th = law.internal({k: vals[k] for k in law.names})[None, :] + np.random.default_rng(0).normal(
        0, 0.05, (3, len(law.names))
    )
    _, J = law.evaluate(th, X, jac=True, smooth=smooth)
    assert J.shape == (3, len(law.names), len(df))
    h = 1e-6
    for k in range(len(law.names)):
        tp, tm = th.copy(), th.copy()
        tp[:, k] += h
        tm[:, k] -= h
        fd = (law.evaluate(tp, X, smooth=smooth) - law.evaluate(tm, X, smooth=smooth)) / (2 * h)
        assert np.allclose(fd, J[:, k, :], atol=1e-6), law.names[k]


def test_smoothed_hinge_is_close_to_the_exact_one_away_from_the_kink():
    law = get_law("depth-delusion")
    df = _table(200)
    th = law.internal(PLANTED["depth-delusion[log]"])[None, :]
    X = law.data(df)
    exact = law.evaluate(th, X, smooth=0.0)
    soft = law.evaluate(th, X, smooth=1e-3)
    assert np.allclose(exact, soft, atol=2e-3)


def test_dcrit_values_match_the_papers_extrapolations():
    law = get_law("depth-delusion")
    dc = law.dcrit({"kappa": 2.43}, [12288, 18432, 8192])
    assert np.allclose(dc, [22.9, 23.9, 21.9], atol=0.06)  # docs/science.md §1: GPT-3, PaLM, Llama-3 70B
    pw = get_law("depth-delusion", dcrit="power")
    assert np.allclose(pw.dcrit({"c": 1.0, "p": 0.44}, [4096]), 4096**0.44)
    batch = law.dcrit({"kappa": np.array([1.0, 2.0])}, [math.e, math.e**2])
    assert np.allclose(batch, [[1, 2], [2, 4]])


def test_pins_parse_validate_and_name_what_is_allowed():
    law = get_law("depth-delusion")
    assert parse_pins("alpha=0.076", law) == {"alpha": 0.076}
    assert parse_pins(["alpha=0.076", "kappa=2.43"], law) == {"alpha": 0.076, "kappa": 2.43}
    with pytest.raises(BadInput, match="parameters of depth-delusion"):
        parse_pins("beta=0.3", law)
    with pytest.raises(BadInput, match="NAME=VALUE"):
        parse_pins("alpha", law)
    with pytest.raises(BadInput, match="a number"):
        parse_pins("alpha=fast", law)
    with pytest.raises(BadInput, match="kappa > 0"):
        parse_pins("kappa=-1", law)
    with pytest.raises(BadInput, match="<= alpha <="):
        parse_pins("alpha=99", law)
    every = ",".join(f"{k}={v}" for k, v in PLANTED["depth-delusion[log]"].items())
    with pytest.raises(BadInput, match="at least one free parameter"):
        parse_pins(every, law)
