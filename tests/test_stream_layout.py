"""The segmented residual stream (model/gpt.py ``Stream``) computes exactly what one
R-wide stream does: every layer of width w_i reading the stream's first w_i coordinates
and concatenating the untouched rest back (the layout before segments, written here as
the reference).  fp64: outputs and every gradient bit for bit; fp32: within 1e-6.
Also: what autograd saves for a × model is at most the uniform model's at matched size."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from depthwidth.model.gpt import VariableWidthGPT
from depthwidth.model.spec import ModelSpec

# widths of 6 layers around h = 64, per family (multiples of the 16-wide heads)
FAMILIES = {
    "uniform": (64,) * 6,
    "x": (96, 64, 32, 32, 64, 96),
    "increasing": (32, 48, 64, 80, 96, 112),
    "decreasing": (112, 96, 80, 64, 48, 32),
    "diamond": (32, 64, 96, 96, 64, 32),
}
BASE = ModelSpec(widths=FAMILIES["x"], vocab_size=29, embed_width=64, head_dim=16, bias=True)


def reference_forward(model: VariableWidthGPT, idx, targets):
    """The whole-stream layout: pad the embedding to R; each layer splits the stream at w_i,
    runs on the prefix and concatenates the suffix back; readout truncates."""
    s = model.spec
    x = model.wte(idx) * (s.m_emb if s.mup else 1)
    R = model.stream_width
    if R > x.size(-1):
        x = F.pad(x, (0, R - x.size(-1)))
    T = idx.size(1)
    for i, block in enumerate(model.blocks):
        hs = block.attn.head_size
        rope = (getattr(model, f"rope_cos_{hs}")[:T], getattr(model, f"rope_sin_{hs}")[:T]) if s.rope else None
        if s.resize == "zero" and s.input_width(i) < R:
            x = F.pad(x[..., : s.input_width(i)], (0, R - s.input_width(i)))
        w = block.width
        if s.resize == "proj" or w == R:
            x = block(x, rope)
        else:
            prefix, suffix = x.split((w, R - w), dim=-1)
            x = torch.cat((block(prefix, rope), suffix), dim=-1)
    wL, F_w, h = s.widths[-1], s.final_norm_width, s.embed_width
    if s.resize == "zero" and wL < R:
        x = F.pad(x[..., :wL], (0, R - wL))
    if model.proj_out is not None:
        x = model.proj_out(x)
    x = model.norm_f(x[..., :F_w])[..., :h]
    logits = model.lm_head(x) / (s.m_width if s.mup else 1)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
    if model.moe_layers and model.training and s.aux_loss_coef > 0:
        loss = loss + s.aux_loss_coef * sum(m.aux for m in model.moe_layers)
    return logits, loss


def _cases():
    for family, resize, stab in itertools.product(
        FAMILIES, ("carry", "zero", "proj"), ("none", "post", "deepnorm", "rezero", "normformer")
    ):
        yield f"{family}-{resize}-{stab}", replace(BASE, widths=FAMILIES[family], resize=resize, stabiliser=stab)
    for family, resize in itertools.product(("uniform", "x", "diamond"), ("carry", "zero", "proj")):
        moe = replace(
            BASE,
            widths=FAMILIES[family],
            resize=resize,
            mlp="moe",
            n_experts=4,
            top_k=2,
            expert_hidden=32,
            norm="rmsnorm",
            bias=False,
            n_head=4,
            head_dim=None,
        )
        yield f"moe-{family}-{resize}", moe
        yield f"mup-swiglu-{family}-{resize}", replace(moe, mlp="swiglu", mup=True, width_scaled_init=True)


CASES = dict(_cases())


def _grads(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", list(CASES))
def test_segments_equal_the_whole_stream_bit_for_bit_in_fp64(name):
    spec = CASES[name]
    torch.manual_seed(0)
    model = VariableWidthGPT(spec, 8).double()
    if spec.stabiliser == "rezero":  # gates start at 0: open them so every branch counts
        with torch.no_grad():
            for b in model.blocks:
                b.gate_attn.fill_(0.7), b.gate_mlp.fill_(-0.4)
    idx, tgt = torch.randint(0, spec.vocab_size, (2, 8)), torch.randint(0, spec.vocab_size, (2, 8))
    logits, loss = model(idx, tgt)
    got = _grads(model, loss)
    ref_logits, ref_loss = reference_forward(model, idx, tgt)
    want = _grads(model, ref_loss)
    assert torch.equal(logits, ref_logits) and torch.equal(loss, ref_loss)
    assert got.keys() == want.keys() and len(got) == len(list(model.parameters()))
    for n in got:
        assert torch.equal(got[n], want[n]), f"{name}: gradient of {n} differs"


@pytest.mark.parametrize("name", ["x-carry-none", "diamond-zero-normformer", "moe-x-carry", "mup-swiglu-x-zero"])
def test_segments_equal_the_whole_stream_within_1e6_in_fp32(name):
    spec = CASES[name]
    torch.manual_seed(1)
    model = VariableWidthGPT(spec, 8)
    idx, tgt = torch.randint(0, spec.vocab_size, (2, 8)), torch.randint(0, spec.vocab_size, (2, 8))
    logits, loss = model(idx, tgt)
    got = _grads(model, loss)
    ref_logits, ref_loss = reference_forward(model, idx, tgt)
    want = _grads(model, ref_loss)
    torch.testing.assert_close(logits, ref_logits, rtol=0, atol=1e-6)
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=1e-6)
    for n in got:
        torch.testing.assert_close(got[n], want[n], rtol=0, atol=1e-6, msg=f"{name}: gradient of {n}")


def test_hidden_states_are_whole_streams_and_the_lens_reads_them():
    spec = CASES["x-carry-none"]
    model = VariableWidthGPT(spec, 8).double()
    idx = torch.randint(0, spec.vocab_size, (1, 8))
    logits, _, hidden = model(idx, return_hidden=True)
    assert [h.size(-1) for h in hidden] == [spec.residual_width] * spec.depth
    assert torch.equal(model.readout(hidden[-1]), logits)  # the logit lens's path equals the forward's


def _saved_bytes(model, idx) -> int:
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        _, loss = model(idx, idx)
    loss.backward()
    return total


def test_a_x_model_saves_no_more_for_backward_than_the_uniform_model_it_matches():
    """12 × 256 uniform vs its × at matched parameters (the VWT recipe's shape at ratio 0.3): the stream's
    untouched coordinates are never copied, so nothing R-wide is saved outside the blocks."""
    from depthwidth.model.resolve import from_config

    common = {
        "preset": "t",
        "depth": 12,
        "width": 256,
        "vocab_size": 512,
        "quantum": 16,
        "head_dim": 16,
        "norm": "rmsnorm",
        "mlp": "swiglu",
    }
    uni, x = from_config({**common, "shape": "uniform"}), from_config({**common, "shape": "x"})
    assert max(x.widths) > 256 > min(x.widths)
    idx = torch.randint(0, 512, (2, 64))
    torch.manual_seed(0)
    su = _saved_bytes(VariableWidthGPT(uni, 64), idx)
    sx = _saved_bytes(VariableWidthGPT(x, 64), idx)
    assert sx <= su, (sx, su)


GOLDEN_STATE = Path(__file__).parent / "golden" / "state_dicts.json"
STATE_CASES = {
    "x-carry": dict(widths=(96, 64, 32, 32, 64, 96)),
    "diamond-zero": dict(widths=(32, 64, 96, 96, 64, 32), resize="zero"),
    "x-proj": dict(widths=(96, 64, 32, 32, 64, 96), resize="proj"),
    "moe-x": dict(
        widths=(96, 64, 32, 32, 64, 96), mlp="moe", n_experts=4, top_k=2, expert_hidden=32, n_head=4, head_dim=None
    ),
}


@pytest.mark.parametrize("name", list(STATE_CASES))
def test_checkpoints_written_before_the_segments_load(name):
    """Parameter names and shapes are those of the whole-stream model (tests/golden/state_dicts.json,
    written by the code before segments), so its checkpoints load as they are."""
    want = json.loads(GOLDEN_STATE.read_text())[name]
    spec = ModelSpec(vocab_size=29, embed_width=64, **{"head_dim": 16, **STATE_CASES[name]})
    model = VariableWidthGPT(spec, 8)
    assert {k: list(v.shape) for k, v in model.state_dict().items()} == want
    old = {k: torch.randn(v) for k, v in want.items()}  # a checkpoint of the old layout's shapes
    model.load_state_dict(old, strict=True)


def test_compiled_blocks_of_many_widths_never_fall_back_to_eager(caplog):
    """train.compile compiles each block; dynamo keeps one graph per block shape under one code
    object and, past its recompile limit (8), silently ran the rest of a shaped model eager.  A
    20-layer diamond has 11 block shapes: compile_blocks raises the limit so every one gets its graph
    (dynamo's "eager" backend here: the graph capture is what is tested, not the code generation)."""
    import logging

    import torch._dynamo

    from depthwidth.train.parallel import compile_blocks

    widths = tuple(16 * k for k in (*range(2, 12), *range(11, 1, -1)))  # 11 distinct widths
    spec = replace(BASE, widths=widths, embed_width=64)
    model = VariableWidthGPT(spec, 8)
    torch._dynamo.reset()
    before = torch._dynamo.config.recompile_limit
    try:
        for b in model.blocks:  # the backend is the test's choice; the limit is compile_blocks'
            b.compile = lambda _b=b, **kw: torch.nn.Module.compile(_b, backend="eager")
        compile_blocks(model)
        assert torch._dynamo.config.recompile_limit >= 8 + len(set(widths))
        idx = torch.randint(0, 29, (2, 8))
        with caplog.at_level(logging.WARNING, logger="torch._dynamo"):
            model(idx, idx)[1].backward()
        assert not [r for r in caplog.records if "recompile_limit" in r.getMessage()]
        counters = torch._dynamo.utils.counters
        assert counters["stats"]["unique_graphs"] >= len(set(widths))
    finally:
        torch._dynamo.config.recompile_limit = before
        torch._dynamo.reset()
