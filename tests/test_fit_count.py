"""Which N a fit means (``--n-convention``) and the shape an optimum N* turns into.

Before: the laws were fitted on the run table's total ``params`` but D*, W* solved 12·D·W² = N*,
so W* came out ~35% too wide at N* = 1e8 (V = 50257); these tests fail on that code."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from depthwidth.core.errors import BadInput
from depthwidth.fit.derived import CountModel, count_model, with_convention
from depthwidth.fit.derived import compute_optimal
from depthwidth.fit.laws import get_law
from depthwidth.fit.pipeline import run_fit
from tests.planted import PLANTED

V = 50257


@pytest.mark.parametrize("sweep", ["depth_delusion", "vwt_scaling"])
def test_count_model_reproduces_dw_accounting_of_every_uniform_run(sweep):
    """The posynomial N(D, W) fitted to a sweep's runs equals dw's exact accounting at every run."""
    import pandas as pd

    from depthwidth.sweep import plan

    runs = [r for r in plan(sweep).runs if r.figures["shape"] == "uniform"]
    df = pd.DataFrame(
        [
            {
                "run": r.run_id,
                "depth": r.figures["depth"],
                "width": r.figures["width"],
                "params": r.figures["params"],
                "params_non_embedding": r.figures["params_non_embedding"],
            }
            for r in runs
        ]
    )
    for conv in ("total", "non-embedding"):
        t, _ = with_convention(df, conv)
        m = count_model(t, conv)
        assert m.max_rel_error < 1e-9, (conv, m.formula)
        assert "e-" not in m.formula, m.formula  # no term the solver's rounding left (1.4418e-11·D)
        lead = dict((lab, c) for lab, _, _, c in m.terms)["D·W²"]
        # blocks: GELU 4 + 8 = 12 W² per layer (depth_delusion), SwiGLU 4 + 12 = 16 (vwt)
        assert lead == pytest.approx(12.0 if sweep == "depth_delusion" else 16.0, rel=1e-9)
    total = count_model(with_convention(df, "total")[0], "total")
    emb = dict((lab, c) for lab, _, _, c in total.terms).get("W", 0.0)
    # untied embedding and head: 2·V·W (plus the final norm's W weights); both sweeps train on the
    # GPT-2 vocabulary (vwt_scaling: SlimPajama, not the paper's cl100k)
    assert emb == pytest.approx(2 * V, rel=1e-4)


@pytest.mark.parametrize("sweep", ["demo", "isoflop_depth_cpu"])
def test_the_count_names_only_terms_that_count(sweep):
    """SwiGLU blocks, 256-token vocabulary: per layer 16·W² + 2·W (two norms), 2·256 + 1 W outside them.
    nnls had left 1.4123e-11 and 1.64877e-11·D + 4.52635e-11 (its rounding) in the non-embedding count."""
    import pandas as pd

    from depthwidth.sweep import plan

    runs = [r for r in plan(sweep).runs if r.figures["shape"] == "uniform"]
    keys = ("depth", "width", "params", "params_non_embedding")
    df = pd.DataFrame([{"run": r.run_id, **{k: r.figures[k] for k in keys}} for r in runs])
    got = {conv: count_model(with_convention(df, conv)[0], conv).formula for conv in ("total", "non-embedding")}
    assert got == {"total": "N = 16·D·W² + 513·W + 2·D·W", "non-embedding": "N = 16·D·W² + 1·W + 2·D·W"}


def test_a_sweep_at_one_width_cannot_split_the_width_terms():
    """D·W² and D·W are indistinguishable at one width: the model keeps only what the runs tell apart."""
    import pandas as pd

    D = np.array([2, 4, 8, 16, 32.0])
    df = pd.DataFrame(
        {
            "run": [f"d{d}" for d in D],
            "depth": D,
            "width": 512.0,
            "params": 12 * D * 512**2 + 13 * D * 512 + 2 * V * 512,
        }
    )
    m = count_model(df, "total")
    assert [lab for lab, *_ in m.terms] == ["D·W²", "W"] and m.max_rel_error < 1e-12


def test_conventions_and_their_errors():
    import pandas as pd

    df = pd.DataFrame({"run": ["a"], "depth": [4], "width": [64], "params": [1e6]})
    t, note = with_convention(df, "12DW2")
    assert t["params"].iloc[0] == 12 * 4 * 64**2 and t["params_total"].iloc[0] == 1e6 and "12·D·W²" in note
    with pytest.raises(BadInput, match="params_non_embedding column"):
        with_convention(df, "non-embedding")
    with pytest.raises(BadInput, match="--n-convention"):
        run_fit(runs=df, law="chinchilla", n_convention="embedding", write=False)


def _truth_shape(v, N):
    """D*, W* of N* = 12·D·W² + 2·V·W on the deepest penalty-free shape D = c·W^p (scalar root)."""
    from scipy.optimize import brentq

    u = brentq(lambda u: math.log(12 * v["c"] * math.exp((2 + v["p"]) * u) + 2 * V * math.exp(u)) - math.log(N), 0, 30)
    return v["c"] * math.exp(v["p"] * u), math.exp(u)


def _n_opt(v, C):
    G = (v["alpha"] * v["A"] / (v["delta"] * v["B"])) ** (1 / (v["alpha"] + v["delta"]))
    return G * (C / 6) ** (v["delta"] / (v["alpha"] + v["delta"]))


def _c_for(v, N):
    G = (v["alpha"] * v["A"] / (v["delta"] * v["B"])) ** (1 / (v["alpha"] + v["delta"]))
    return 6 * (N / G) ** ((v["alpha"] + v["delta"]) / v["delta"])


def test_depth_delusion_optimum_solves_the_total_count():
    law = get_law("depth-delusion", dcrit="power")
    v = PLANTED["depth-delusion[power]"]
    m = CountModel("total", (("D·W²", 1, 2, 12.0), ("W", 0, 1, 2.0 * V)))
    for N in (1e8, 1e9):
        co = compute_optimal(law, v, c_ref=_c_for(v, N), count=m)
        D, W = _truth_shape(v, N)
        assert co["N_opt"][0] == pytest.approx(N, rel=1e-9)
        assert co["W_opt"][0] == pytest.approx(W, rel=1e-9) and co["D_opt"][0] == pytest.approx(D, rel=1e-9)
        naive = compute_optimal(law, v, c_ref=_c_for(v, N))["W_opt"][0]  # 12·D·W² = N*: too wide
        assert naive / W > (1.3 if N == 1e8 else 1.05)


def test_width_depth_optimum_with_embeddings_matches_brute_force():
    law = get_law("width-depth")
    v = PLANTED["width-depth"]
    m = CountModel("total", (("D·W²", 1, 2, 12.0), ("W", 0, 1, 2.0 * V)))
    C = 1e20

    def loss(x):
        W, D = np.exp(x)
        N = m.n(D, W)
        return float(
            law.predict(v, {"params": [N], "tokens": [C / (6 * N)], "depth": [D], "width": [W], "loss": [1.0]})[0]
        )

    best = min(
        (
            minimize(loss, [w0, d0], method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-15, "maxiter": 20000})
            for w0 in (5.0, 7.0, 9.0)
            for d0 in (1.0, 3.0)
        ),
        key=lambda r: r.fun,
    )
    co = compute_optimal(law, v, c_ref=C, count=m)
    assert co["W_opt"][0] == pytest.approx(math.exp(best.x[0]), rel=1e-4)
    assert co["D_opt"][0] == pytest.approx(math.exp(best.x[1]), rel=1e-4)
    assert co["N_opt"][0] == pytest.approx(m.n(co["D_opt"][0], co["W_opt"][0]), rel=1e-12)


def _planted_total(seed=2):
    """A depth-delusion[power] world whose N is the total count 12·D·W² + 2·V·W."""
    import pandas as pd

    law = get_law("depth-delusion", dcrit="power")
    v = PLANTED["depth-delusion[power]"]
    rng = np.random.default_rng(seed)
    rows = []
    for w in (128, 256, 512, 1024, 2048, 4096):
        for d in (2, 4, 8, 12, 16, 24, 32, 48, 64):
            N = 12.0 * d * w * w + 2.0 * V * w
            for f in (0.25, 0.5, 1.0):
                rows.append({"run": f"w{w}d{d}", "params": N, "tokens": f * 20 * N, "depth": d, "width": w})
    df = pd.DataFrame(rows)
    df["loss"] = 1.0
    df["loss"] = law.predict(v, df) * np.exp(rng.normal(0, 0.005, len(df)))
    return df, v


@pytest.mark.parametrize("N", [1e8, 1e9])
def test_planted_total_count_shape_recovered_within_its_interval(N):
    """Plant, fit with the total count (as a dw store's params are), compare D*, W* at N* with the truth."""
    df, v = _planted_total()
    res = run_fit(
        runs=df,
        law="depth-delusion",
        dcrit="power",
        n_convention="total",
        c_ref=_c_for(v, N),
        bootstrap=60,
        max_starts=300,
        write=False,
    )
    co = res["derived"]["compute_optimal"]
    D, W = _truth_shape(v, N)
    assert res["n_convention"]["name"] == "total" and res["n_convention"]["count"]["max_rel_error"] < 1e-9
    assert "2·V" not in co["constraint"] and "·W" in co["constraint"]
    lo, hi = co["ci"]["W_opt"]
    assert lo <= W <= hi and co["ci"]["D_opt"][0] <= D <= co["ci"]["D_opt"][1]
    assert co["ci"]["N_opt"][0] <= _n_opt(v, _c_for(v, N)) <= co["ci"]["N_opt"][1]
    naive = compute_optimal(get_law("depth-delusion", dcrit="power"), res["params"], c_ref=_c_for(v, N))["W_opt"][0]
    assert not lo <= naive <= hi  # what 12·D·W² = N* gave: outside the interval
