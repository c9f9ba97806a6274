"""accounting.py: exact against the built model, the published counts, FlopCounterMode."""

from __future__ import annotations

import itertools
import subprocess
import sys
from dataclasses import replace

import pytest

from depthwidth.model import accounting
from depthwidth.model.accounting import (
    account,
    count_params,
    flops_per_token,
    kv_bytes_per_token,
    total_params_for_widths,
)
from depthwidth.core.errors import BadInput
from depthwidth.model.spec import ModelSpec

H = 32  # embedding width h for the shape cases
SHAPES = {  # widths multiple of 16 so both head options divide them
    "uniform": (32, 32, 32),  # also h == w_1
    "x": (64, 32, 16, 32, 64),  # w_1 > h, w_L > h
    "diamond": (16, 32, 64, 32, 16),  # w_1 < h, w_L < h
    "increasing": (16, 32, 48, 64),  # w_L > h
    "decreasing": (64, 48, 32, 16),  # w_1 > h, w_L < h
}
HEADS = {"head_dim": dict(head_dim=16, n_head=None), "n_head": dict(head_dim=None, n_head=4)}


def all_specs():
    for norm, mlp, heads, shape, tied, resize, bias, embed in itertools.product(
        ("layernorm", "rmsnorm"),
        ("gelu", "swiglu"),
        HEADS,
        SHAPES,
        (False, True),
        ("carry", "zero", "proj"),
        (False, True),
        ("h", "first"),
    ):
        widths = SHAPES[shape]
        yield ModelSpec(
            widths=widths,
            vocab_size=37,
            embed_width=widths[0] if embed == "first" else H,
            norm=norm,
            mlp=mlp,
            tied=tied,
            resize=resize,
            bias=bias,
            **HEADS[heads],
        )


def test_count_params_equals_model_numel_for_every_option():
    import torch
    from depthwidth.model.gpt import VariableWidthGPT

    n = 0
    for spec in all_specs():
        model = VariableWidthGPT(spec, max_seq_len=4)
        numel = sum(p.numel() for p in model.parameters())
        p = count_params(spec)
        assert p["total"] == numel, spec
        tables = {id(t): t for t in (model.wte.weight, model.lm_head.weight)}.values()
        assert p["embedding"] == sum(t.numel() for t in tables)
        linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
        assert p["matmul"] == linear, spec
        assert p["non_embedding"] == p["total"] - p["embedding"]
        n += 1
    assert n == 2 * 2 * 2 * 5 * 2 * 3 * 2 * 2


def gpt2_style(depth, width):
    return ModelSpec(
        widths=(width,) * depth,
        vocab_size=50257,
        embed_width=width,
        norm="layernorm",
        mlp="gelu",
        head_dim=64,
        tied=False,
        bias=True,
    )


@pytest.mark.parametrize(
    "depth,width,published", [(16, 512, 102.1e6), (24, 512, 127.3e6), (32, 4096, 6.86e9), (64, 2816, 6.38e9)]
)
def test_published_depth_delusion_counts(depth, width, published):
    total = count_params(gpt2_style(depth, width))["total"]
    assert abs(total / published - 1) < 0.005, total


def test_hand_count_small_spec():
    # 2 layers w=8, h=8, V=10, layernorm, gelu 4x, bias, untied:
    # per layer 12·64 matmul + (3·8 + 8 + 32 + 8) biases + 4·8 norms = 768 + 72 + 32 = 872
    spec = ModelSpec(widths=(8, 8), vocab_size=10, embed_width=8, head_dim=4, bias=True)
    assert count_params(spec) == {
        "total": 2 * 872 + 16 + 160,
        "embedding": 160,
        "non_embedding": 2 * 872 + 16,
        "matmul": 2 * 768 + 80,
        "active": 2 * 872 + 16 + 160,
        "matmul_active": 2 * 768 + 80,
    }  # dense: all active


@pytest.mark.parametrize("spec", list(itertools.islice(all_specs(), 0, None, 37)))
def test_continuous_count_is_the_same_formula(spec):
    # Integer widths with an integral mlp_ratio·w: identical to the exact count.
    assert total_params_for_widths(spec.widths, spec) == count_params(spec)["total"]


def test_continuous_count_between_neighbours_and_unrounded():
    t = ModelSpec(widths=(64,), vocab_size=100, embed_width=64, head_dim=16, mlp_ratio=2.5)
    lo, mid, hi = (total_params_for_widths([w, 64.0], t) for w in (48, 48.5, 49))
    assert lo < mid < hi
    # mlp hidden = 2.5·w, not int(2.5·w): the w=49 layer has 122.5 hidden units.
    wide = total_params_for_widths([49.0], t)
    assert wide == 100 * 64 * 2 + 4 * 49**2 + 2 * 49 * 122.5 + 4 * 49 + 2 * 64
    with pytest.raises(BadInput):
        total_params_for_widths([], t)
    with pytest.raises(BadInput):
        total_params_for_widths([64, 0], t)


def test_flops_dense_is_three_times_measured_forward_linear_flops():
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from depthwidth.model.gpt import VariableWidthGPT

    T = 12
    for spec in (
        ModelSpec(widths=(64, 32, 96), vocab_size=101, embed_width=48, head_dim=16, mlp="swiglu"),
        ModelSpec(
            widths=(64, 32, 96), vocab_size=101, embed_width=48, head_dim=16, resize="proj", tied=True, bias=True
        ),
        ModelSpec(widths=(32, 32), vocab_size=50, embed_width=32, n_head=4, head_dim=None, norm="rmsnorm"),
    ):
        model = VariableWidthGPT(spec, T)
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            model(torch.zeros(2, T, dtype=torch.long))
        counts = {str(op): n for op, n in fc.get_flop_counts()["Global"].items()}
        linear = counts.get("aten.mm", 0) + counts.get("aten.addmm", 0)  # every nn.Linear / F.linear
        assert flops_per_token(spec, T)["dense"] == 3 * linear / (2 * T)


def test_attention_flops_and_kv_by_hand():
    spec = ModelSpec(widths=(64, 32), vocab_size=10, embed_width=64, head_dim=16)
    d_sum = 64 + 32
    causal = flops_per_token(spec, 8)
    # per query, per layer: 2·n_ctx·d (QKᵀ) + 2·n_ctx·d (AV), ×3 for training; n_ctx = 4.5
    assert causal["attention"] == 3 * 4 * 4.5 * d_sum == 5184
    assert flops_per_token(spec, 8, causal=False)["attention"] == 3 * 4 * 8 * d_sum
    assert causal["dense"] == 6 * count_params(spec)["matmul"]
    assert causal["total"] == causal["dense"] + causal["attention"]
    # K and V, 2 bytes each (bf16): 2·(4·16 + 2·16)·2
    assert kv_bytes_per_token(spec) == 384
    assert kv_bytes_per_token(spec, bytes_per_value=4) == 768
    vwt = replace(spec, n_head=8, head_dim=None)  # fixed head count: same d_i
    assert kv_bytes_per_token(vwt) == 384


def test_account_gathers_everything():
    spec = ModelSpec(widths=(64, 32, 64), vocab_size=10, embed_width=48, head_dim=16)
    a = account(spec, 16)
    p, f = count_params(spec), flops_per_token(spec, 16)
    assert (a["params"], a["params_non_embedding"], a["params_embedding"], a["params_matmul"]) == (
        p["total"],
        p["non_embedding"],
        p["embedding"],
        p["matmul"],
    )
    assert (a["flops_per_token"], a["flops_attention_per_token"], a["flops_dense_per_token"]) == (
        f["total"],
        f["attention"],
        f["dense"],
    )
    assert a["kv_bytes_per_token"] == kv_bytes_per_token(spec)
    assert (a["depth"], a["widths"], a["mean_width"], a["seq_len"]) == (3, [64, 32, 64], 160 / 3, 16)


def test_bad_input():
    spec = ModelSpec(widths=(64,), vocab_size=10, embed_width=64, head_dim=16)
    for seq_len in (0, -1, 1.5, True):
        with pytest.raises(BadInput, match="seq_len"):
            flops_per_token(spec, seq_len)
    with pytest.raises(BadInput, match="head dimension"):
        count_params(replace(spec, widths=(40,)))
    with pytest.raises(BadInput, match="bytes_per_value"):
        kv_bytes_per_token(spec, 0)


def test_accounting_does_not_import_torch():
    code = "import sys, depthwidth.model.accounting; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert accounting.__name__ == "depthwidth.model.accounting"


@pytest.mark.parametrize("stabiliser", ["none", "post", "deepnorm", "rezero", "normformer"])
def test_count_params_with_depth_stabilisers(stabiliser):
    from depthwidth.model.gpt import VariableWidthGPT

    for spec in itertools.islice(all_specs(), 0, None, 37):  # a spread of option sets
        spec = replace(spec, stabiliser=stabiliser)
        model = VariableWidthGPT(spec, max_seq_len=4)
        assert count_params(spec)["total"] == sum(p.numel() for p in model.parameters()), spec
