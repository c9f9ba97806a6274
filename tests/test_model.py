"""VariableWidthGPT: equal to a plain transformer when uniform, carry-forward
exact when not, every resize mode trainable."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from depthwidth.core.errors import BadInput
from depthwidth.model.gpt import VariableWidthGPT
from depthwidth.model.spec import ModelSpec

# ---- a plain uniform pre-LN transformer, written independently -------------
# Weights are stored "x @ W" (in, out) and named after the maths, so loading
# them into the model needs an explicit mapping (transposes included).


def ref_params(V, d, L, hidden, norm, mlp, bias, tied, gen):
    r = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64) * 0.3  # noqa: E731
    P = {"emb": r(V, d), "gf": 1 + r(d)}
    if not tied:
        P["head"] = r(d, V)
    if norm == "layernorm":
        P["bf"] = r(d)
    for l in range(L):
        P[f"{l}.g1"], P[f"{l}.g2"] = 1 + r(d), 1 + r(d)
        if norm == "layernorm":
            P[f"{l}.b1"], P[f"{l}.b2"] = r(d), r(d)
        P[f"{l}.Wq"], P[f"{l}.Wk"], P[f"{l}.Wv"], P[f"{l}.Wo"] = r(d, d), r(d, d), r(d, d), r(d, d)
        P[f"{l}.Wup"], P[f"{l}.Wdown"] = r(d, hidden), r(hidden, d)
        if mlp == "swiglu":
            P[f"{l}.Wgate"] = r(d, hidden)
        if bias:
            P[f"{l}.bq"], P[f"{l}.bk"], P[f"{l}.bv"], P[f"{l}.bo"] = r(d), r(d), r(d), r(d)
            P[f"{l}.bup"], P[f"{l}.bdown"] = r(hidden), r(d)
            if mlp == "swiglu":
                P[f"{l}.bgate"] = r(hidden)
    return P


def ref_norm(x, g, b):
    if b is None:  # RMSNorm
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + 1e-5) * g + b


def ref_rope(x, base):
    # x: (B, H, T, hs); coordinate j is paired with j + hs/2, angle t / base^(2j/hs).
    T, hs = x.shape[-2], x.shape[-1]
    half = hs // 2
    out = x.clone()
    for j in range(half):
        theta = torch.arange(T, dtype=torch.float64) / base ** (2 * j / hs)
        c, s = torch.cos(theta), torch.sin(theta)
        a, b = x[..., j], x[..., j + half]
        out[..., j], out[..., j + half] = a * c - b * s, b * c + a * s
    return out


def ref_forward(P, idx, L, n_head, norm, mlp, bias, rope_base):
    lin = lambda x, l, n: x @ P[f"{l}.W{n}"] + (P[f"{l}.b{n}"] if bias else 0)  # noqa: E731
    nb = lambda key: P.get(key) if norm == "layernorm" else None  # noqa: E731
    x = P["emb"][idx]
    B, T, d = x.shape
    hs = d // n_head
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        a = ref_norm(x, P[f"{l}.g1"], nb(f"{l}.b1"))
        q, k, v = (lin(a, l, n).view(B, T, n_head, hs).transpose(1, 2) for n in "qkv")
        q, k = ref_rope(q, rope_base), ref_rope(k, rope_base)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        x = x + lin((att @ v).transpose(1, 2).reshape(B, T, d), l, "o")
        a = ref_norm(x, P[f"{l}.g2"], nb(f"{l}.b2"))
        if mlp == "gelu":
            u = lin(a, l, "up")
            hmid = 0.5 * u * (1 + torch.erf(u / math.sqrt(2)))
        else:
            g = lin(a, l, "gate")
            hmid = g * torch.sigmoid(g) * lin(a, l, "up")
        x = x + lin(hmid, l, "down")
    x = ref_norm(x, P["gf"], nb("bf"))
    return x @ (P["emb"].T if "head" not in P else P["head"])


def to_model_state(P, L, norm, mlp, bias, tied):
    S = {"wte.weight": P["emb"], "norm_f.weight": P["gf"]}
    S["lm_head.weight"] = P["emb"] if tied else P["head"].T
    if norm == "layernorm":
        S["norm_f.bias"] = P["bf"]
    for l in range(L):
        p = f"blocks.{l}."
        S[p + "norm_1.weight"], S[p + "norm_2.weight"] = P[f"{l}.g1"], P[f"{l}.g2"]
        if norm == "layernorm":
            S[p + "norm_1.bias"], S[p + "norm_2.bias"] = P[f"{l}.b1"], P[f"{l}.b2"]
        S[p + "attn.c_attn.weight"] = torch.cat([P[f"{l}.W{n}"] for n in "qkv"], dim=1).T
        S[p + "attn.c_proj.weight"] = P[f"{l}.Wo"].T
        S[p + "mlp.c_fc.weight"] = P[f"{l}.Wup"].T
        S[p + "mlp.c_proj.weight"] = P[f"{l}.Wdown"].T
        if mlp == "swiglu":
            S[p + "mlp.c_gate.weight"] = P[f"{l}.Wgate"].T
        if bias:
            S[p + "attn.c_attn.bias"] = torch.cat([P[f"{l}.b{n}"] for n in "qkv"])
            S[p + "attn.c_proj.bias"] = P[f"{l}.bo"]
            S[p + "mlp.c_fc.bias"], S[p + "mlp.c_proj.bias"] = P[f"{l}.bup"], P[f"{l}.bdown"]
            if mlp == "swiglu":
                S[p + "mlp.c_gate.bias"] = P[f"{l}.bgate"]
    return S


UNIFORM_CASES = {
    # depth_delusion-like: layernorm, GELU 4x, head_dim 64, untied, biases
    "depth_delusion": dict(norm="layernorm", mlp="gelu", head_dim=64, n_head=None, bias=True, tied=False, d=128),
    # vwt-like: RMSNorm, SwiGLU, 16 heads, tied and untied
    "vwt_untied": dict(norm="rmsnorm", mlp="swiglu", head_dim=None, n_head=16, bias=False, tied=False, d=64),
    "vwt_tied": dict(norm="rmsnorm", mlp="swiglu", head_dim=None, n_head=16, bias=False, tied=True, d=64),
}


@pytest.mark.parametrize("case", sorted(UNIFORM_CASES))
def test_uniform_model_equals_plain_transformer(case):
    c = UNIFORM_CASES[case]
    V, L, d, T = 53, 3, c["d"], 11
    spec = ModelSpec(
        widths=(d,) * L,
        vocab_size=V,
        embed_width=d,
        norm=c["norm"],
        mlp=c["mlp"],
        n_head=c["n_head"],
        head_dim=c["head_dim"],
        bias=c["bias"],
        tied=c["tied"],
        rope_base=500.0,
    )
    n_head = spec.heads(0)
    gen = torch.Generator().manual_seed(0)
    P = ref_params(V, d, L, spec.mlp_hidden(0), c["norm"], c["mlp"], c["bias"], c["tied"], gen)
    model = VariableWidthGPT(spec, max_seq_len=16).double()
    model.load_state_dict(to_model_state(P, L, c["norm"], c["mlp"], c["bias"], c["tied"]), strict=True)
    # The model keeps its RoPE tables in float32 by design (~1e-7 error); give
    # it float64 ones so the comparison can be tight enough to catch an eps.
    hs = d // n_head
    angle = torch.arange(16, dtype=torch.float64)[:, None] / 500.0 ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs)
    model.get_buffer(f"rope_cos_{hs}").copy_(angle.cos())
    model.get_buffer(f"rope_sin_{hs}").copy_(angle.sin())
    if c["tied"]:
        assert model.lm_head.weight is model.wte.weight

    idx = torch.randint(0, V, (2, T), generator=gen)
    targets = torch.randint(0, V, (2, T), generator=gen)
    logits, loss = model(idx, targets)
    expected = ref_forward(P, idx, L, n_head, c["norm"], c["mlp"], c["bias"], 500.0)
    torch.testing.assert_close(logits, expected, rtol=1e-10, atol=1e-10)
    ref_loss = F.nll_loss(torch.log_softmax(expected, -1).view(-1, V), targets.view(-1))
    torch.testing.assert_close(loss, ref_loss, rtol=1e-10, atol=1e-10)


def test_uniform_stream_is_block_output_without_copies():
    # Fast path: with every w_i = R the stream after layer i *is* block i's output.
    spec = ModelSpec(widths=(32,) * 3, vocab_size=17, embed_width=32, head_dim=16)
    model = VariableWidthGPT(spec, 8)
    outs = []
    for b in model.blocks:
        b.register_forward_hook(lambda mod, inp, out: outs.append(out))
    _, _, hidden = model(torch.randint(0, 17, (1, 8)), return_hidden=True)
    assert len(hidden) == 3 and all(h is o for h, o in zip(hidden, outs))


# ---- non-uniform: carry-forward ---------------------------------------------

X_SPEC = ModelSpec(
    widths=(96, 64, 32, 64, 96), vocab_size=41, embed_width=64, norm="rmsnorm", mlp="swiglu", n_head=4, head_dim=None
)


@pytest.mark.parametrize(
    "spec",
    [
        X_SPEC,
        replace(X_SPEC, norm="layernorm", mlp="gelu", bias=True, tied=True),
        replace(X_SPEC, widths=(32, 64, 96, 64, 32)),  # diamond: w_1 < h, w_L < h
    ],
    ids=["x", "x-layernorm-tied", "diamond"],
)
def test_carry_forward_passes_suffix_bit_identically(spec):
    torch.manual_seed(1)
    model = VariableWidthGPT(spec, 16)
    idx = torch.randint(0, spec.vocab_size, (2, 16))
    _, _, hidden = model(idx, return_hidden=True)
    R = spec.residual_width
    assert [h.shape[-1] for h in hidden] == [R] * spec.depth
    before = F.pad(model.wte(idx), (0, R - spec.embed_width))
    for i, (w, after) in enumerate(zip(spec.widths, hidden)):
        if w < R:
            assert torch.equal(after[..., w:], before[..., w:]), f"layer {i} touched coordinates >= {w}"
        assert not torch.equal(after[..., :w], before[..., :w]), f"layer {i} did not write its prefix"
        before = after
    # The narrow middle layer really carried something nonzero forward.
    mid = spec.widths.index(min(spec.widths))
    if spec.widths[0] > min(spec.widths):
        assert hidden[mid][..., min(spec.widths) :].abs().sum() > 0


@pytest.mark.parametrize("resize", ["carry", "zero", "proj"])
@pytest.mark.parametrize("tied", [False, True])
def test_gradients_reach_every_parameter(resize, tied):
    torch.manual_seed(2)
    spec = replace(X_SPEC, resize=resize, tied=tied, bias=True, norm="layernorm")
    model = VariableWidthGPT(spec, 16)
    idx = torch.randint(0, spec.vocab_size, (2, 16))
    _, loss = model(idx, torch.roll(idx, -1, dims=1))
    assert torch.isfinite(loss)
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all() and (p.grad != 0).any(), name


@pytest.mark.parametrize("rope", [True, False])
def test_causal_no_position_sees_the_future(rope):
    torch.manual_seed(7)
    model = VariableWidthGPT(replace(X_SPEC, rope=rope), 12)
    idx = torch.randint(0, X_SPEC.vocab_size, (1, 12))
    changed = idx.clone()
    changed[0, 7] = (idx[0, 7] + 1) % X_SPEC.vocab_size
    a, b = model(idx)[0], model(changed)[0]
    assert torch.equal(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


# ---- the other resize modes -------------------------------------------------


def test_zero_padding_zeroes_beyond_input_width():
    torch.manual_seed(3)
    spec = ModelSpec(widths=(96, 32, 64, 96, 32), vocab_size=29, embed_width=64, head_dim=16, resize="zero")
    model = VariableWidthGPT(spec, 12)
    block_in, norm_in = {}, []
    for i, b in enumerate(model.blocks):
        b.register_forward_pre_hook(lambda mod, args, i=i: block_in.__setitem__(i, args[0]))
    model.norm_f.register_forward_pre_hook(lambda mod, args: norm_in.append(args[0]))
    idx = torch.randint(0, 29, (2, 12))
    logits, loss, hidden = model(idx, torch.roll(idx, 1, 1), return_hidden=True)
    assert torch.isfinite(loss)
    for i, w in enumerate(spec.widths):
        in_w = spec.input_width(i)
        x = block_in[i]
        assert x.shape[-1] == w
        if w > in_w:  # the layer sees the previous width, zero-padded
            assert torch.equal(x[..., in_w:], torch.zeros_like(x[..., in_w:]))
            assert x[..., :in_w].abs().sum() > 0
        beyond = max(w, in_w)
        assert torch.equal(hidden[i][..., beyond:], torch.zeros_like(hidden[i][..., beyond:]))
    # Before the final norm, coordinates >= w_L are zero (here w_L = 32 < h = 64).
    (x,) = norm_in
    assert x.shape[-1] == spec.final_norm_width == 64
    assert torch.equal(x[..., 32:], torch.zeros_like(x[..., 32:])) and x[..., :32].abs().sum() > 0
    # The same weights under carry-forward see nonzero coordinates there: the modes differ.
    carry = VariableWidthGPT(replace(spec, resize="carry"), 12)
    carry.load_state_dict(model.state_dict())
    assert not torch.allclose(carry(idx)[0], logits)


def test_zero_and_carry_agree_for_uniform_widths():
    spec = ModelSpec(widths=(32, 32), vocab_size=19, embed_width=32, head_dim=16, resize="zero")
    torch.manual_seed(4)
    zero = VariableWidthGPT(spec, 8)
    carry = VariableWidthGPT(replace(spec, resize="carry"), 8)
    carry.load_state_dict(zero.state_dict())
    idx = torch.randint(0, 19, (2, 8))
    assert torch.equal(zero(idx)[0], carry(idx)[0])


def test_learned_projection_stream_follows_layer_width():
    torch.manual_seed(5)
    spec = ModelSpec(
        widths=(64, 64, 32, 96), vocab_size=31, embed_width=48, head_dim=16, resize="proj", norm="rmsnorm", mlp="swiglu"
    )
    model = VariableWidthGPT(spec, 10)
    # A projection exactly where the width changes: 48->64, 64->32, 32->96, then 96->48.
    assert [None if b.proj_in is None else tuple(b.proj_in.weight.shape) for b in model.blocks] == [
        (64, 48),
        None,
        (32, 64),
        (96, 32),
    ]
    assert tuple(model.proj_out.weight.shape) == (48, 96)
    assert all(b.proj_in is None or b.proj_in.bias is None for b in model.blocks)
    idx = torch.randint(0, 31, (3, 10))
    logits, loss, hidden = model(idx, torch.roll(idx, 1, 1), return_hidden=True)
    assert [h.shape[-1] for h in hidden] == list(spec.widths)
    assert logits.shape == (3, 10, 31) and torch.isfinite(loss)
    loss.backward()
    assert model.proj_out.weight.grad.abs().sum() > 0


# ---- init, introspection, bad input -------------------------------------------


def test_init_statistics():
    torch.manual_seed(6)
    L, h = 2, 64
    spec = ModelSpec(
        widths=(256, 64), vocab_size=512, embed_width=h, head_dim=32, bias=True, width_scaled_init=True, init_std=0.02
    )
    m = VariableWidthGPT(spec, 8)
    close = lambda t, s: abs(t.std().item() / s - 1) < 0.05  # noqa: E731
    assert close(m.wte.weight, 0.02) and close(m.lm_head.weight, 0.02)
    for b in m.blocks:
        std = 0.02 * math.sqrt(h / b.width)
        assert close(b.attn.c_attn.weight, std) and close(b.mlp.c_fc.weight, std)
        assert close(b.attn.c_proj.weight, std / math.sqrt(2 * L))
        assert close(b.mlp.c_proj.weight, std / math.sqrt(2 * L))
        assert torch.equal(b.attn.c_attn.bias, torch.zeros_like(b.attn.c_attn.bias))
        assert torch.equal(b.norm_1.weight, torch.ones_like(b.norm_1.weight))
        assert torch.equal(b.norm_2.bias, torch.zeros_like(b.norm_2.bias))


def test_layer_params_partition_each_block():
    spec = replace(X_SPEC, resize="proj")
    m = VariableWidthGPT(spec, 8)
    groups = m.layer_params()
    assert len(groups) == spec.depth
    for b, g in zip(m.blocks, groups):
        ids = lambda ps: {id(p) for p in ps}  # noqa: E731
        assert ids(g["block"]) == ids(b.parameters())
        assert ids(g["attn"]) == ids(b.attn.parameters()) and ids(g["mlp"]) == ids(b.mlp.parameters())
        assert ids(g["attn"]) | ids(g["mlp"]) < ids(g["block"])  # norms (and proj_in) are block-only
    assert m.num_params() == sum(p.numel() for p in m.parameters())


def test_num_params_counts_a_tied_head_once():
    spec = ModelSpec(widths=(32,), vocab_size=11, embed_width=32, head_dim=16)
    untied = VariableWidthGPT(spec, 8).num_params()
    assert untied - VariableWidthGPT(replace(spec, tied=True), 8).num_params() == 11 * 32


def test_bad_input():
    spec = ModelSpec(widths=(32,), vocab_size=11, embed_width=32, head_dim=16)
    m = VariableWidthGPT(spec, 8)
    with pytest.raises(BadInput, match="sequence length"):
        m(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(BadInput, match="max_seq_len"):
        VariableWidthGPT(spec, 0)
    with pytest.raises(BadInput, match="multiple of the head dimension"):
        VariableWidthGPT(replace(spec, widths=(40,)), 8)


@pytest.mark.parametrize("stabiliser", ["post", "deepnorm", "rezero", "normformer"])
def test_depth_stabilisers_train_and_carry_forward(stabiliser):
    """Every stabiliser keeps carry-forward exact and gives a finite, trainable loss."""
    torch.manual_seed(0)
    spec = ModelSpec(
        widths=(64, 32, 16, 32, 64), vocab_size=37, embed_width=32, n_head=None, head_dim=8, stabiliser=stabiliser
    )
    model = VariableWidthGPT(spec, max_seq_len=8)
    idx = torch.randint(0, 37, (2, 8))
    _, loss, hidden = model(idx, idx, return_hidden=True)
    assert torch.isfinite(loss)
    x0 = model.wte(idx)
    x0 = torch.nn.functional.pad(x0, (0, model.stream_width - x0.size(-1)))
    streams = [x0] + hidden
    for i, w in enumerate(spec.widths):
        assert torch.equal(streams[i][..., w:], streams[i + 1][..., w:])
    loss.backward()
    if stabiliser == "rezero":  # gates start at 0: only they (and the head side) learn at first
        assert all(b.gate_attn.grad is not None for b in model.blocks)
    else:
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
