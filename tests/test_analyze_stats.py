"""`dw analyze`'s statistics against their definitions: p(target) = exp(−CE) (the geometric
mean), and SwiGLU activity at each layer's CETT threshold ("Sparsing Law"): scale-free,
exact on planted dead units, CETT(ε) at the target when recomputed here from scratch."""

from __future__ import annotations

import math

import pytest
import torch

from depthwidth.measure.inside import analyse
from depthwidth.model.gpt import VariableWidthGPT
from depthwidth.model.spec import ModelSpec

V = 97
CETT_TARGET = 0.2  # the default target (measure.stats.CETT_TARGET)


def _model(seed=0, **kw):
    spec = ModelSpec(
        **{
            "widths": (48, 24, 48),
            "vocab_size": V,
            "embed_width": 32,
            "head_dim": 8,
            "mlp": "swiglu",
            "norm": "rmsnorm",
            **kw,
        }
    )
    torch.manual_seed(seed)
    return VariableWidthGPT(spec, 32).eval()


def _tokens(n_seq, seed=1):
    return torch.randint(0, V, (n_seq, 32), generator=torch.Generator().manual_seed(seed))


def _cett_by_hand(a, W, eps):
    """CETT from its definition, per token then averaged (a: tokens × m, W: w × m)."""
    a, W = a.double(), W.double()
    y = a @ W.T
    keep = y.norm(dim=-1) > 0
    low = a * (a.abs() < eps)
    return float(((low @ W.T).norm(dim=-1)[keep] / y.norm(dim=-1)[keep]).mean())


def _hidden(model, idx, module=lambda b: b.mlp.c_proj):
    """Each layer's MLP hidden activations (tokens × m) on ``idx``: the input of ``module(block)``."""
    got = {}

    def keep(i):
        def hook(_mod, inp):
            got[i] = inp[0].reshape(-1, inp[0].size(-1)).clone()

        return hook

    hs = [module(b).register_forward_pre_hook(keep(i)) for i, b in enumerate(model.blocks)]
    with torch.no_grad():
        model(idx)
    for h in hs:
        h.remove()
    return [got[i] for i in range(len(model.blocks))]


# ---------------------------------------------------------------------------- logit lens


def test_lens_target_prob_is_exp_of_minus_ce_the_geometric_mean():
    model = _model()
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)  # sharp predictions: a clear gap between the two means
    x, y = _tokens(6), _tokens(6, seed=2)
    doc = analyse(model, x, y, batch_tokens=64)
    for r in [*doc["layers"], doc["embedding_lens"]]:
        assert r["lens_target_prob"] == pytest.approx(math.exp(-r["lens_ce"]), rel=1e-12)
        assert r["lens_target_prob"] < r["lens_target_prob_mean"]  # Jensen: geometric < arithmetic
    with torch.no_grad():  # the top layer's lens is the model itself: both means from its own logits
        logits, loss = model(x, y)
        p = torch.softmax(logits.double(), -1).gather(-1, y[..., None]).squeeze(-1)
    top = doc["layers"][-1]
    assert top["lens_target_prob"] == pytest.approx(float(torch.exp(torch.log(p).mean())), rel=1e-5)
    assert top["lens_target_prob"] == pytest.approx(math.exp(-float(loss)), rel=1e-5)
    assert top["lens_target_prob_mean"] == pytest.approx(float(p.mean()), rel=1e-5)


# ---------------------------------------------------------------------------- CETT threshold


@pytest.mark.parametrize("kw", [{}, {"stabiliser": "normformer", "norm": "layernorm"}, {"bias": True}])
def test_each_layers_threshold_gives_cett_at_the_target_on_the_calibration_tokens(kw):
    from depthwidth.measure import stats
    from depthwidth.measure.inside import CALIBRATION_TOKENS

    assert stats.CETT_TARGET == CETT_TARGET
    model = _model(**kw)
    x = _tokens(96)  # 3,072 tokens: the first 2,048 (64 windows) calibrate
    doc = analyse(model, x, x)
    assert doc["options"]["mlp_rule"] == "cett" and doc["options"]["cett_target"] == CETT_TARGET == 0.2
    assert doc["options"]["calibration_tokens"] == CALIBRATION_TOKENS == 2048
    cal = x[:64]
    normformer = kw.get("stabiliser") == "normformer"  # then a is the input of the mid-norm
    acts = _hidden(model, cal, (lambda b: b.mlp.mid_norm) if normformer else (lambda b: b.mlp.c_proj))
    for r, b, a in zip(doc["layers"], model.blocks, acts):
        eps = r["mlp_threshold"]
        W = b.mlp.c_proj.weight.detach()
        if b.mlp.mid_norm is not None:  # the dropped units' share of c_proj(LN(a)) at the token's own σ
            g = b.mlp.mid_norm.weight.detach()
            W = (W * g) - (W * g).mean(dim=1, keepdim=True)
        got = _cett_by_hand(a, W, eps)
        assert got <= CETT_TARGET + 1e-12 and got == pytest.approx(CETT_TARGET, abs=2e-3), (r["layer"], got)
        mags = a.abs().reshape(-1).unique()
        assert eps in mags.tolist()  # one of the calibration |a| values
        nxt = float(mags[mags > eps][0])
        assert _cett_by_hand(a, W, nxt) > CETT_TARGET  # the next larger one would overshoot: ε is the largest
        assert stats.cett([(a, W)], eps) == pytest.approx(got, abs=1e-12)


def test_with_a_mid_norm_the_units_reach_the_output_through_unit_out():
    """c_proj(LN(a)) − c_proj(LN(0)) = unit_out · a / σ(a): the contributions CETT splits are exact
    up to one positive per-token scale, which cancels in its ratio."""
    from depthwidth.measure.inside import unit_out

    model = _model(stabiliser="normformer", norm="layernorm", bias=True)
    with torch.no_grad():
        for b in model.blocks:
            b.mlp.mid_norm.weight.uniform_(0.5, 2.0)
            b.mlp.mid_norm.bias.normal_()
    model.double()
    a = torch.randn(50, model.spec.mlp_hidden(0), dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    mlp = model.blocks[0].mlp
    with torch.no_grad():
        lhs = mlp.c_proj(mlp.mid_norm(a)) - mlp.c_proj(mlp.mid_norm(torch.zeros_like(a)))
        sigma = torch.sqrt(a.var(dim=-1, unbiased=False, keepdim=True) + mlp.mid_norm.eps)
        rhs = a @ unit_out(mlp).T / sigma
    assert torch.allclose(lhs, rhs, rtol=1e-10, atol=1e-12)


def test_cett_threshold_on_known_activations():
    from depthwidth.measure.stats import cett, cett_threshold

    # two units, one output dim: y = 3·a1 + 1·a2; a1 = 1 always, a2 = 2 always
    a = torch.tensor([[1.0, 2.0]] * 4)
    W = torch.tensor([[3.0, 1.0]])
    # dropping a1 (ε in (1, 2]) loses 3/5; dropping nothing loses 0
    assert cett([(a, W)], 1.0) == 0.0 and cett([(a, W)], 2.0) == pytest.approx(0.6)
    assert cett_threshold([(a, W)], 0.5) == 1.0  # ε = 1: a1 kept (|a1| >= ε)
    assert cett_threshold([(a, W)], 0.7) == 2.0  # losing a1 is allowed, losing both (1.0) is not
    with pytest.raises(ValueError):
        cett_threshold([(a, W)], 1.0)


# ---------------------------------------------------------------------------- scale-freeness


def _rescale(model, s):
    """Up ("c_fc", not the gate) × s, c_proj × 1/s: the same function, activations s times smaller."""
    with torch.no_grad():
        for b in model.blocks:
            b.mlp.c_fc.weight.mul_(s)
            b.mlp.c_proj.weight.div_(s)


@pytest.mark.parametrize("s, exact", [(2.0**-10, True), (1e-3, False)])
def test_density_and_dead_fraction_are_scale_free(s, exact):
    x = _tokens(48)
    ref_model, model = _model(), _model()
    _rescale(model, s)
    with torch.no_grad():
        same = ref_model(x)[0], model(x)[0]
    assert torch.equal(*same) if exact else torch.allclose(*same, rtol=1e-4, atol=1e-5)
    ref, got = analyse(ref_model, x, x), analyse(model, x, x)
    for a, b in zip(ref["layers"], got["layers"]):
        assert 0.1 < a["mlp_density"] < 0.9
        assert b["mlp_dead"] == a["mlp_dead"]
        if exact:
            assert (b["mlp_density"], b["mlp_balance"]) == (a["mlp_density"], a["mlp_balance"])
            assert b["mlp_threshold"] == a["mlp_threshold"] * s
        else:
            assert b["mlp_density"] == pytest.approx(a["mlp_density"], abs=1e-5)
            assert b["mlp_balance"] == pytest.approx(a["mlp_balance"], abs=1e-5)
            assert b["mlp_threshold"] == pytest.approx(a["mlp_threshold"] * s, rel=1e-5)
    # the old fixed |a| > 1e-3 is not: the same model reads as (nearly) all dead
    old_ref, old = analyse(ref_model, x, x, threshold=1e-3), analyse(model, x, x, threshold=1e-3)
    assert old["options"]["mlp_rule"] == "fixed" and old["options"]["swiglu_threshold"] == 1e-3
    assert all(o["mlp_density"] < r["mlp_density"] - 0.3 for o, r in zip(old["layers"], old_ref["layers"]))


# ---------------------------------------------------------------------------- mixture of experts


def test_moe_planted_dead_expert_units_and_pooled_cett():
    model = _model(mlp="moe", n_experts=4, top_k=2, expert_hidden=48)
    m = [model.spec.mlp_hidden(i) for i in range(3)]  # 72, 36, 72 per expert
    plant = {0: {1: range(0, 30), 3: range(10, 20)}, 2: {0: range(5, 7)}}  # layer -> expert -> dead units
    with torch.no_grad():
        for i, experts in plant.items():
            for e, units in experts.items():
                model.blocks[i].mlp.w_fc[e, list(units)] = 0.0  # up rows 0: those units are exactly 0
        for b in model.blocks:  # and the same function at activations 1,024 times smaller
            b.mlp.w_fc.mul_(2.0**-10)
            b.mlp.w_proj.mul_(2.0**10)
    x = _tokens(80)
    captured = {i: [] for i in range(3)}  # the calibration pass's expert activations
    for i, b in enumerate(model.blocks):
        b.mlp.on_hidden = lambda e, a, i=i: captured[i].append((e, a.clone()))
    with torch.no_grad():
        model(x[:64])
    for b in model.blocks:
        b.mlp.on_hidden = None
    doc = analyse(model, x, x)
    for i, r in enumerate(doc["layers"]):
        dead = sum(len(u) for u in plant.get(i, {}).values())
        assert r["mlp_dead"] == dead / (4 * m[i]), i
        parts = [(a, model.blocks[i].mlp.w_proj[e].detach()) for e, a in captured[i]]
        pooled = sum(_cett_by_hand(a, W, r["mlp_threshold"]) * a.size(0) for a, W in parts) / sum(
            a.size(0) for a, _ in parts
        )  # the mean over all (token, expert) slots of the layer
        assert pooled <= CETT_TARGET + 1e-12 and pooled == pytest.approx(CETT_TARGET, abs=2e-3)
    assert doc["options"]["mlp_rule"] == "cett"
