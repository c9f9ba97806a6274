"""The VWT recipe: µP multipliers, the power schedule, the mixture-of-experts MLP."""

from __future__ import annotations

import json
import math
import os
import signal
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from depthwidth.config.compose import compose
from depthwidth.config.identity import run_id
from depthwidth.model.accounting import count_params
from depthwidth.model.gpt import VariableWidthGPT
from depthwidth.model.moe import MoE
from depthwidth.model.resolve import from_config
from depthwidth.model.spec import ModelSpec
from depthwidth.train import optim
from tests.helpers import REPO, assert_bad_input, dw, gate_env, run_dw
from tests.test_train import _metrics, _spawn, _summary, _wait_for

BASE = ModelSpec(
    widths=(64, 32, 64),
    vocab_size=97,
    embed_width=48,
    norm="rmsnorm",
    mlp="swiglu",
    n_head=4,
    head_dim=None,
    width_scaled_init=True,
)


def _build(spec, seed=0, T=16):
    torch.manual_seed(seed)
    return VariableWidthGPT(spec, T)


# ---- µP -----------------------------------------------------------------------------------------


def test_mup_with_unit_multipliers_is_the_standard_model_exactly():
    std = _build(BASE)
    unit = _build(replace(BASE, mup=True, m_width=1.0, m_emb=1.0, m_residual=1.0, attn_scale="inv_sqrt"))
    for (n, a), (_, b) in zip(std.state_dict().items(), unit.state_dict().items()):
        assert torch.equal(a, b), n
    idx = torch.randint(0, 97, (2, 16))
    o = SimpleNamespace(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opts = [optim.build_optimizer(m, o) for m in (std, unit)]
    assert [len(op.param_groups) for op in opts] == [2, 3]  # the µP group exists, at lr / 1
    for _ in range(2):
        for m, op in zip((std, unit), opts):
            optim.set_lr(op, 1e-2)
            m(idx, idx)[1].backward()
            op.step()
            op.zero_grad()
    assert torch.equal(std(idx)[0], unit(idx)[0])


def _rms(x, g):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * g


def test_mup_forward_matches_a_hand_computed_two_layer_model():
    spec = ModelSpec(
        widths=(64, 32),
        vocab_size=50,
        embed_width=48,
        norm="rmsnorm",
        mlp="swiglu",
        n_head=4,
        head_dim=None,
        rope=False,
        width_scaled_init=True,
        mup=True,
    )  # m_width 8, m_emb 12, m_r 0.22
    model = _build(spec).double()
    P = dict(model.named_parameters())
    idx = torch.randint(0, 50, (2, 7))
    T = idx.size(1)
    x = P["wte.weight"][idx] * 12.0  # m_emb
    x = F.pad(x, (0, 64 - 48))  # the stream is max(w) = 64 wide; coordinates beyond h start at 0
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i, w in enumerate(spec.widths):
        b = f"blocks.{i}."
        pre, rest = x[..., :w], x[..., w:]
        h = _rms(pre, P[b + "norm_1.weight"])
        q, k, v = (h @ P[b + "attn.c_attn.weight"].t()).split(w, -1)
        hd = w // 4
        q, k, v = (t.reshape(2, T, 4, hd).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / hd  # µP: 1/head_dim
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        a = (att @ v).transpose(1, 2).reshape(2, T, w) @ P[b + "attn.c_proj.weight"].t()
        pre = pre + 0.22 * a  # m_residual
        h2 = _rms(pre, P[b + "norm_2.weight"])
        m = F.silu(h2 @ P[b + "mlp.c_gate.weight"].t()) * (h2 @ P[b + "mlp.c_fc.weight"].t())
        pre = pre + 0.22 * (m @ P[b + "mlp.c_proj.weight"].t())
        x = torch.cat((pre, rest), -1)
    # carry: the last layer (32 wide) left coordinates 32..63 from layer 1; the final norm covers
    # max(w_L, h) = 48 of them, then the head reads h = 48.
    y = _rms(x[..., :48], P["norm_f.weight"])
    logits = (y @ P["lm_head.weight"].t()) / 8.0  # m_width
    got = model(idx)[0]
    assert torch.allclose(got, logits, rtol=0, atol=1e-12)


# lm-engine's µP learning-rate group (mark_parameter_as_mup_learning_rate): every matrix in a block
MUP_LR = {
    "attn.c_attn.weight",
    "attn.c_proj.weight",
    "mlp.c_fc.weight",
    "mlp.c_gate.weight",
    "mlp.c_proj.weight",
    "mlp.router.weight",
    "mlp.w_fc",
    "mlp.w_gate",
    "mlp.w_proj",
}


def test_mup_init_and_learning_rate_groups_follow_the_configs():
    spec = replace(BASE, mup=True, init_std=0.1)
    m = _build(replace(spec, widths=(256, 256, 256), embed_width=256))
    o = SimpleNamespace(lr=0.01, betas=(0.9, 0.95), eps=1e-10, weight_decay=0.1)
    for model in (m, _build(replace(spec, mlp="moe", n_experts=4, top_k=2, expert_hidden=16))):
        op = optim.build_optimizer(model, o)
        optim.set_lr(op, 0.01)
        name = {id(p): n for n, p in model.named_parameters()}
        for g in op.param_groups:
            names = {
                name[id(p)].split(".", 2)[-1] if name[id(p)].startswith("blocks.") else name[id(p)] for p in g["params"]
            }
            if g["lr_scale"] != 1.0:
                assert names <= MUP_LR and g["lr"] == pytest.approx(0.01 / 8) and g["weight_decay"] == 0.1
            else:
                assert not names & MUP_LR and g["lr"] == 0.01, names
        if model is not m:
            mup = [g for g in op.param_groups if g["lr_scale"] != 1.0][0]
            assert {name[id(p)].split(".", 2)[-1] for p in mup["params"]} >= {"mlp.router.weight", "mlp.w_fc"}
    # hidden inputs at 0.1 / sqrt(8), output projections further / sqrt(2L); embedding, head at 0.1
    std = lambda t: float(t.detach().std())  # noqa: E731
    assert std(m.blocks[0].attn.c_attn.weight) == pytest.approx(0.1 / math.sqrt(8), rel=0.03)
    assert std(m.blocks[0].mlp.c_proj.weight) == pytest.approx(0.1 / math.sqrt(8) / math.sqrt(6), rel=0.03)
    assert std(m.wte.weight) == pytest.approx(0.1, rel=0.03)
    assert std(m.lm_head.weight) == pytest.approx(0.1, rel=0.03)
    moe = _build(
        replace(spec, widths=(256, 256, 256), embed_width=256, mlp="moe", n_experts=8, top_k=2, expert_hidden=128)
    )
    assert std(moe.blocks[0].mlp.router.weight) == pytest.approx(0.1 / math.sqrt(8), rel=0.05)  # as lm-engine's gate
    assert std(moe.blocks[0].mlp.w_fc) == pytest.approx(0.1 / math.sqrt(8), rel=0.03)


def test_mup_is_refused_with_a_depth_stabiliser():
    p = dw("train", "model.mup=true", "model.stabiliser=post", "train.steps=1")
    assert "model.stabiliser" in assert_bad_input(p)


def test_options_at_their_off_values_keep_existing_run_ids():
    # ids of these configs before µP, MoE and the power schedule existed (commit 2b53bb0)
    # (model=vwt then defaulted to the × shape and the vwt convention: pinned here)
    vwt = ("model=vwt", "model.shape=x", "model.match=vwt")
    before = {(): "8395b0d05173", vwt: "7b63d76da498", ("optim.schedule=wsd", "model.shape=x"): "72b92de545b4"}
    for o, rid in before.items():
        assert run_id(compose([*o, "train.precision=fp32"])) == rid
    on = run_id(compose([*vwt, "model.mup=true", "train.precision=fp32"]))
    assert on != before[vwt]


# ---- the power schedule -------------------------------------------------------------------------


def test_power_schedule_equals_its_formula_and_warms_up_over_8_percent():
    o = compose(["optim=vwt"]).optim
    c = 1048576  # 500M: 1M tokens per step, a = c / 1024 = 1024
    total = 23844
    W = round(0.08 * total)
    assert W == 1908 == optim.warmup_steps(o, total)  # the config's num_warmup_steps
    a, b = 1024.0, -0.566
    for s in (W, 5000, 12000, total - 1):  # after warm-up: a · tokens^b, tokens seen after the step
        assert optim.lr_at(s, total, o, c) == pytest.approx(a * ((s + 1) * c) ** b, rel=1e-12)
    end = a * (W * c) ** b
    assert optim.lr_at(W - 1, total, o, c) == pytest.approx(end, rel=1e-12)  # warm-up ends on the curve
    assert optim.lr_at(0, total, o, c) == pytest.approx(end / W, rel=1e-12)
    assert optim.lr_at(W // 2, total, o, c) == pytest.approx(end * (W // 2 + 1) / W, rel=1e-12)
    # capped at the peak lr where the power law lies above it; auto a scales with the batch
    assert optim.lr_at(100, 1000, SimpleNamespace(**{**o, "power_a": 1e6}), 4096) == o.lr
    assert optim.power_a(o, 4096) == 4.0
    with pytest.raises(ValueError):
        optim.lr_at(5, 100, o)  # decays in tokens: the caller must say how many per step


# ---- mixture of experts -------------------------------------------------------------------------


def _moe(E=6, k=2, w=16, m=8, seed=0):
    torch.manual_seed(seed)
    moe = MoE(w, m, E, k).double()
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return moe


def test_batched_dispatch_equals_a_per_token_loop():
    moe = _moe()
    x = torch.randn(3, 11, 16, dtype=torch.float64)
    out = moe(x)
    xt = x.reshape(-1, 16)
    logits, weights, experts = moe.route(xt)
    ref = torch.zeros_like(xt)
    for t in range(xt.size(0)):  # the reference: one token, its k experts, in expert order
        for j in sorted(range(moe.top_k), key=lambda j: int(experts[t, j])):
            e = int(experts[t, j])
            ref[t] = ref[t] + weights[t, j] * moe.expert(e, xt[t : t + 1])[0]
    # equal up to fp64 rounding: a batched matmul and a one-row matmul may sum in other orders (BLAS)
    torch.testing.assert_close(out.reshape(-1, 16), ref, rtol=0, atol=1e-14)
    # normalised top-k: each token's k weights are the softmax of its k largest logits, summing to 1
    top = logits.topk(moe.top_k, -1).values
    assert torch.allclose(weights, top.softmax(-1), rtol=0, atol=1e-15)
    assert torch.allclose(weights.sum(-1), torch.ones(xt.size(0), dtype=torch.float64), rtol=0, atol=1e-15)


def test_load_balancing_loss_equals_its_formula_on_a_planted_routing():
    E, N = 4, 4
    moe = MoE(E, 2, E, 1).double()
    with torch.no_grad():
        moe.router.weight.copy_(torch.eye(E))
    choice = [0, 0, 1, 2]  # expert 3 gets nothing
    x = torch.stack([10.0 * F.one_hot(torch.tensor(e), E).double() for e in choice])
    moe(x)
    f = [0.5, 0.25, 0.25, 0.0]
    z = math.exp(10) + 3
    p_hit, p_miss = math.exp(10) / z, 1 / z
    P = [(sum(p_hit if c == e else p_miss for c in choice)) / N for e in range(E)]
    z = math.log(z) ** 2  # every token's logsumexp of its logits is log(e^10 + 3)
    want = E * sum(fe * pe for fe, pe in zip(f, P)) + 0.1 * z  # lm-engine: switch loss + 0.1 · z-loss
    assert float(moe.aux.detach()) == pytest.approx(want, rel=1e-12)
    assert moe.load.tolist() == f
    moe.router_z = 0.0
    moe(x)
    assert float(moe.aux.detach()) == pytest.approx(E * sum(fe * pe for fe, pe in zip(f, P)), rel=1e-12)


def _moe_x_spec():
    return from_config(
        compose(
            [
                "model=vwt",
                "model.mlp=moe",
                "model.n_experts=4",
                "model.top_k=2",
                "model.expert_hidden=64",
                "model.depth=4",
                "model.width=128",
                "model.shape=x",
            ]
        ).model
    )


def test_moe_accounting_counts_the_built_tensors_total_and_active():
    for spec in (_moe_x_spec(), replace(_moe_x_spec(), bias=True, norm="layernorm")):
        model = VariableWidthGPT(spec, 16)
        c = count_params(spec)
        assert c["total"] == sum(p.numel() for p in model.parameters())
        idle = sum(
            (m.n_experts - m.top_k) * (m.w_fc[0].numel() + m.w_gate[0].numel() + m.w_proj[0].numel())
            for m in model.moe_layers
        )
        assert c["active"] == c["total"] - idle
        assert [m.hidden for m in model.moe_layers] == [round(w * 64 / 128) for w in spec.widths]


def test_shapes_prints_total_and_active_parameters_of_the_moe_preset():
    p = dw("shapes", "x", "--preset", "moe_1b3b", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert (r["width"], r["depth"], r["turn"]) == (1600, 40, 30)
    u, s = r["uniform"], r["shaped"]
    assert 2.85e9 < u["params"] < 2.95e9 and 1.0e9 < u["params_active"] < 1.05e9  # ≈2.9B total, ≈1.0B active
    # the paper reports ≈3% fewer active parameters for ×: its own count (solve_hparams.py) gives 3.2%
    assert s["params_vwt_active"] / u["params_vwt_active"] == pytest.approx(0.968, abs=0.002)
    p = dw("shapes", "x", "--preset", "moe_1b3b")
    assert "active params" in p.stdout


MOE_RUN = [
    "model=vwt",
    "model.shape=x",
    "model.mlp=moe",
    "model.mup=true",
    "model.n_experts=4",
    "model.top_k=2",
    "model.expert_hidden=64",
    "model.depth=4",
    "model.width=128",
    "model.init_std=0.1",
    "optim=vwt",
    "train.batch_size=8",
    "train.seq_len=64",
    "train.threads=1",
    "train.log_every=5",
    "probe.every=10",
    "train.steps=40",
    "train.ckpt_every=20",
]


def test_a_tiny_moe_x_model_trains_is_killed_and_resumes_exactly(tmp_path):
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    assert dw("train", *MOE_RUN, f"run.dir={ref}").returncode == 0
    gate = tmp_path / "gate"  # the run waits before step 25, past its step-20 checkpoint, to be killed there
    proc = _spawn([*MOE_RUN, f"run.dir={cut}"], env=gate_env(gate, 25))
    _wait_for(gate / f"at-25-{proc.pid}")
    assert (cut / "ckpt" / "step_00000020" / "MANIFEST").exists()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    p = dw("train", *MOE_RUN, f"run.dir={cut}")
    assert p.returncode == 0, p.stderr
    assert "from step 20" in p.stderr
    assert _metrics(cut) == _metrics(ref)
    assert _summary(cut)["final_val_loss"] == _summary(ref)["final_val_loss"]
    assert math.isfinite(_summary(ref)["final_val_loss"])
    probes = [json.loads(x) for x in (ref / "probes.jsonl").read_text().splitlines()]
    for r in probes:  # router load per layer: shares of the token-slots, summing to 1
        assert len(r["router"]["load"]) == 4 and r["router"]["dropped"] == [0] * 4
        for layer in r["router"]["load"]:
            assert len(layer) == 4 and sum(layer) == pytest.approx(1.0)
    assert (cut / "probes.jsonl").read_text() == (ref / "probes.jsonl").read_text()


# ---- the cl100k tokenizer for `dw data prepare` -----------------------------------------------


def test_prepare_with_a_local_cl100k_file_and_without_tiktoken(tmp_path):
    import base64

    # a planted cl100k-format BPE file: the 256 single bytes and one merge ("ab"); the real
    # cl100k_base.tiktoken cannot be fetched on an offline machine.  The regex and special
    # tokens are tiktoken's own cl100k ones.
    ranks = [bytes([i]) for i in range(256)] + [b"ab"]
    bpe = tmp_path / "cl100k_base.tiktoken"
    bpe.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(ranks)))
    (tmp_path / "corpus").mkdir()
    docs = {"ab" + x + y for x in "cdefgh" for y in "cdefgh"}  # 36 documents, "ab" + two letters
    for i, d in enumerate(sorted(docs)):
        (tmp_path / "corpus" / f"{i}.txt").write_text(d)
    p = dw(
        "data",
        "prepare",
        "--source",
        str(tmp_path / "corpus"),
        "--out",
        str(tmp_path / "d"),
        "--tokenizer",
        f"cl100k:{bpe}",
        "--val-fraction",
        "0.2",
    )
    assert p.returncode == 0, p.stderr
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["vocab_size"] == 100263 and meta["eot"] == 100257 and meta["tokenizer"]["kind"] == "cl100k"
    ids = np.fromfile(tmp_path / "d" / meta["splits"]["train"]["shards"][0]["file"], dtype=meta["dtype"])
    rows = ids.reshape(-1, 4)  # every document: "ab" merged into 256, its two letters, the end-of-text id
    assert (rows[:, 0] == 256).all() and (rows[:, 3] == 100257).all()
    assert {"ab" + chr(a) + chr(b) for a, b in rows[:, 1:3]} <= docs
    # without tiktoken (an import that fails, as on a machine without the extra): one line, exit 2
    block = tmp_path / "block"
    block.mkdir()
    (block / "tiktoken.py").write_text("raise ImportError('not installed')\n")
    env = {"PYTHONPATH": f"{block}{os.pathsep}{REPO}"}
    p = run_dw(
        "data",
        "prepare",
        "--source",
        str(tmp_path / "corpus"),
        "--out",
        str(tmp_path / "e"),
        "--tokenizer",
        "cl100k",
        env=env,
    )
    assert "tiktoken" in assert_bad_input(p) and not (tmp_path / "e").exists()


def test_vwt_scaling_dry_run_lists_the_four_sizes_by_two_shapes_with_flops_and_plans():
    p = dw("sweep", "vwt_scaling", "--dry-run", "--no-data-check", "launcher=slurm", "--json")
    assert p.returncode == 0, p.stderr
    runs = json.loads(p.stdout)["runs"]
    assert len(runs) == 8 and all(r["error"] is None for r in runs)
    assert sorted((r["width"], r["depth"], r["shape"]) for r in runs) == sorted(
        (h, L, s) for h, L in ((640, 16), (960, 24), (1280, 32), (1600, 40)) for s in ("uniform", "x")
    )
    per_step = {640: 524288, 960: 1048576, 1280: 2097152, 1600: 4194304}  # the configs' tokens per step
    for r in runs:
        assert r["tokens"] % per_step[r["width"]] == 0 and r["flops"] > 0
        assert r["plan"]["processes"] == 8 and r["plan"]["fits"] and r["precision"] == "bf16"


def test_report_router_table_reads_the_last_probe_step_of_each_moe_run():
    from depthwidth.report.render import ORDER, md_table
    from depthwidth.report.router import router_table

    skew = [0.7, 0.1, 0.1, 0.1]
    probes = [
        {
            "run": "moe",
            "shape": "x",
            "width": 128,
            "depth": 2,
            "probes": [
                {"step": 10, "router": {"load": [[1.0, 0, 0, 0]] * 2, "dropped": [0, 0]}},
                {"step": 20, "router": {"load": [[0.25] * 4, skew], "dropped": [0, 0]}},
            ],
        },
        {"run": "dense", "shape": "uniform", "width": 128, "depth": 2, "probes": [{"step": 20}]},
    ]
    t = router_table(probes)
    assert [r["run"] for r in t.rows] == ["moe"]
    r = t.rows[0]
    assert (r["step"], r["experts"], r["worst_layer"], r["dropped"]) == (20, 4, 2, 0)
    assert r["mean_max"] == pytest.approx((1.0 + 2.8) / 2) and r["worst_max"] == pytest.approx(2.8)
    assert r["min_share"] == pytest.approx(0.4)
    h2 = -sum(p * math.log(p) for p in skew) / math.log(4)
    assert r["entropy"] == pytest.approx((1.0 + h2) / 2)
    assert router_table(probes[1:]) is None  # no MoE run: no table
    assert "router" in ORDER and "| moe | x | 128 | 2 | 20 | 4 | 1.90 | 2.80 | 2 | 0.40 |" in md_table(t)


def test_analyze_measures_moe_units_on_the_tokens_routed_to_their_expert():
    from depthwidth.measure.inside import analyse

    spec = from_config(
        compose(
            [
                "model=vwt",
                "model.mlp=moe",
                "model.n_experts=2",
                "model.top_k=2",
                "model.expert_hidden=64",
                "model.depth=2",
                "model.width=64",
                "model.heads=4",
                "model.shape=uniform",
            ]
        ).model
    )
    model = _build(spec, T=32)
    with torch.no_grad():
        model.blocks[0].mlp.w_gate[0].zero_()  # expert 0 of layer 1: silu(0) = 0, all its units dead
    x = torch.randint(0, spec.vocab_size, (4, 32))
    out = analyse(model, x, torch.roll(x, -1, 1))
    first = out["layers"][0]
    assert first["mlp_dead"] == 0.5  # top-2 of 2: every token reaches both experts; expert 1 is alive
    assert out["layers"][1]["mlp_dead"] == 0.0 and 0 < out["layers"][1]["mlp_density"] <= 1
    assert all(m.on_hidden is None for m in model.moe_layers)  # the hooks are removed
