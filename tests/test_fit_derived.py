"""Derived numbers: D_crit at reference models, compute-optimal exponents, gradient persistence."""

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from depthwidth.fit.derived import REFERENCE_MODELS, compute_optimal, derived_numbers
from depthwidth.fit.analyses.gradient_persistence import persistence, profile_fit
from tests.planted import PLANTED
from depthwidth.fit.laws import get_law


def _brute(law, v, C):
    """Minimise L(D, W, T = C/(72 D W^2)) numerically over (ln W, ln D)."""

    def loss(x):
        W, D = np.exp(x)
        N = 12 * D * W * W
        row = {"params": [N], "tokens": [C / (6 * N)], "depth": [D], "width": [W], "loss": [1.0]}
        return float(law.predict(v, row)[0])

    best = None
    for w0 in (4.0, 6.0, 8.0, 10.0):
        for d0 in (1.0, 2.5, 4.0):
            r = minimize(
                loss, [w0, d0], method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-15, "maxiter": 20000}
            )
            if best is None or r.fun < best.fun:
                best = r
    return np.exp(best.x), best.fun


def test_chinchilla_exponents():
    v = PLANTED["chinchilla"]
    co = compute_optimal(get_law("chinchilla"), v)
    assert co["N_exponent"][0] == pytest.approx(v["beta"] / (v["alpha"] + v["beta"]))
    assert co["N_exponent"][0] + co["T_exponent"][0] == pytest.approx(1.0)


def test_width_depth_closed_form_matches_brute_force():
    law = get_law("width-depth")
    v = PLANTED["width-depth"]
    co = compute_optimal(law, v, c_ref=1e21)
    (W1, D1), _ = _brute(law, v, 1e21)
    (W2, D2), _ = _brute(law, v, 1e23)
    assert co["W_opt"][0] == pytest.approx(W1, rel=1e-3) and co["D_opt"][0] == pytest.approx(D1, rel=1e-3)
    assert co["W_exponent"][0] == pytest.approx(math.log(W2 / W1) / math.log(100), abs=1e-3)
    assert co["D_exponent"][0] == pytest.approx(math.log(D2 / D1) / math.log(100), abs=1e-3)


@pytest.mark.parametrize("form", ["power", "log"])
def test_depth_delusion_optimum_sits_at_dcrit(form):
    """The penalty is >= 0 and zero below D_crit, so N*(C) is Chinchilla's and D* = D_crit(W*)."""
    law = get_law("depth-delusion", dcrit=form)
    v = PLANTED[f"depth-delusion[{form}]"]
    co = compute_optimal(law, v, c_ref=1e21)
    N, W, D = co["N_opt"][0], co["W_opt"][0], co["D_opt"][0]
    assert 12 * D * W * W == pytest.approx(N, rel=1e-9)
    assert D == pytest.approx(law.dcrit(v, [W])[0], rel=1e-9)

    # N* minimises A/N^a + B/(C/6N)^d
    def f(n):
        return v["A"] / n ** v["alpha"] + v["B"] / (1e21 / (6 * n)) ** v["delta"]

    assert f(N) <= min(f(N * 1.01), f(N / 1.01))
    # no (W, D) does better than the reported optimum
    _, best = _brute(law, v, 1e21)
    row = {"params": [N], "tokens": [1e21 / (6 * N)], "depth": [D], "width": [W], "loss": [1.0]}
    assert law.predict(v, row)[0] <= best * (1 + 1e-7)
    # local exponents: slope of ln W*, ln D* against ln C
    hi = compute_optimal(law, v, c_ref=1e21 * 1.001)
    b = math.log(hi["W_opt"][0] / W) / math.log(1.001)
    a = math.log(hi["D_opt"][0] / D) / math.log(1.001)
    assert co["W_exponent"][0] == pytest.approx(b, rel=1e-3)
    assert co["D_exponent"][0] == pytest.approx(a, rel=1e-3)
    if form == "power":
        assert co["D_exponent"][0] / co["W_exponent"][0] == pytest.approx(v["p"])


def test_pinned_alpha_gives_the_exponents_of_the_pinned_law():
    law = get_law("depth-delusion", dcrit="power")
    v = dict(PLANTED["depth-delusion[power]"], alpha=0.076)
    co = compute_optimal(law, v)
    x = v["delta"] / (0.076 + v["delta"])
    assert co["N_exponent"][0] == pytest.approx(x)
    assert co["W_exponent"][0] == pytest.approx(x / (2 + v["p"]))
    assert co["D_exponent"][0] == pytest.approx(v["p"] * x / (2 + v["p"]))


def test_no_interior_optimum_gives_nan_not_nonsense():
    co = compute_optimal(get_law("chinchilla"), dict(PLANTED["chinchilla"], alpha=-0.1))
    assert math.isnan(co["N_exponent"][0])


def test_dcrit_at_reference_models_and_vectorised_over_replicates():
    law = get_law("depth-delusion")
    out = derived_numbers(law, {**PLANTED["depth-delusion[log]"], "kappa": np.array([2.43, 3.0])}, [256, 512])
    assert out["dcrit[W=512]"] == pytest.approx([2.43 * math.log(512), 3.0 * math.log(512)])
    w, d = REFERENCE_MODELS["GPT-3"]
    assert out["dcrit[GPT-3]"][0] == pytest.approx(22.9, abs=0.05)  # docs/science.md: 22.9
    assert out["depth_over_dcrit[GPT-3]"][0] == pytest.approx(96 / (2.43 * math.log(12288)))
    assert "dcrit[GPT-3]" not in derived_numbers(get_law("chinchilla"), PLANTED["chinchilla"], [256])


def test_profile_fit_recovers_tau_and_the_1_over_e_depth():
    tau, L = 6.0, 24
    dist = (L - 1) - np.arange(L)
    g = 2.0 * np.exp(-dist / tau)
    f = profile_fit(g)
    assert f["tau"] == pytest.approx(tau) and f["r2"] == pytest.approx(1.0)
    # D_crit is a depth: the bottom layer of a (tau + 1)-layer net sits at 1/e of the top's
    assert f["dcrit_1e"] == pytest.approx(tau + 1) and f["censored"] is False
    short = profile_fit(g[-4:])  # 4 layers: never falls to 1/e
    assert short["censored"] is True and short["dcrit_1e"] == 4


def test_a_net_whose_bottom_layer_sits_at_1_over_e_has_dcrit_equal_to_its_depth():
    """docs/science.md §4: a 16-layer model with its bottom layer at 1/e has D_crit = 16 (before: 15)."""
    L = 16
    g = np.exp(-((L - 1) - np.arange(L)) / (L - 1))  # bottom layer exactly at 1/e of the top
    assert profile_fit(g)["dcrit_1e"] == pytest.approx(16.0)
    flat = profile_fit(np.ones(8))
    assert flat["tau"] == math.inf


def test_persistence_recovers_the_width_exponent():
    rng = np.random.default_rng(0)
    profs = []
    for w in (64, 128, 256, 512, 1024):
        for d in (16, 32, 48):
            tau = 0.5 * w**0.44
            dist = (d - 1) - np.arange(d)
            g = np.exp(-dist / tau + rng.normal(0, 0.01, d))
            profs.append(
                {
                    "run": f"{w}-{d}",
                    "width": w,
                    "depth": d,
                    "probes": [
                        {"step": 990, "grad_norm": {"block": list(g)}},
                        {"step": 5000, "grad_norm": {"block": list(np.ones(d))}},
                    ],
                }
            )
    gp = persistence(profs, step=1000, B=200)
    assert gp["tau_law"]["p"] == pytest.approx(0.44, abs=0.02)
    assert gp["tau_law"]["r2"] > 0.98
    lo, hi = gp["tau_law"]["p_ci"]
    assert lo <= 0.44 <= hi and hi - lo < 0.1
    assert all(r["step"] == 990 for r in gp["runs"])  # the record nearest step 1000
    by_w = gp["dcrit_by_width"]
    assert by_w["64"]["profiles"] == pytest.approx(0.5 * 64**0.44 + 1, rel=0.05)
    law = get_law("depth-delusion")
    gp2 = persistence(profs[:3], step=1000, B=50, law=law, law_values={"kappa": 2.43})
    assert any("two or more widths" in w for w in gp2["warnings"])
    assert gp2["dcrit_by_width"]["64"]["law"] == pytest.approx(2.43 * math.log(64))


def test_tau_law_uses_uniform_runs_only():
    import math as _m

    from depthwidth.fit.analyses.gradient_persistence import persistence

    def prof(run, width, tau, shape):
        L = 12
        g = [_m.exp(-((L - 1) - i) / tau) for i in range(L)]
        return {
            "run": run,
            "width": width,
            "depth": L,
            "shape": shape,
            "probes": [{"step": 1000, "grad_norm": {"block": g}}],
        }

    profiles = [prof("a", 64, 4.0, "uniform"), prof("b", 256, 8.0, "uniform"), prof("c", 64, 50.0, "x")]
    out = persistence(profiles, B=50)
    assert [r["run"] for r in out["runs"]] == ["a", "b"]
    assert abs(out["tau_law"]["p"] - 0.5) < 1e-6  # tau doubles when W quadruples
    assert any("non-uniform" in w for w in out["warnings"])
