"""The memory plan (train/memory.py) against what the built model holds: the
static part exactly (every tensor on every rank counted), activations against
the bytes autograd actually saves; and the plan's choices."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from depthwidth.config.compose import compose
from depthwidth.core.devices import GPU_MEMORY_GIB
from depthwidth.model.accounting import param_shapes
from depthwidth.model.resolve import from_config
from depthwidth.train import memory
from tests.helpers import REPO

CONFIGS = {
    "uniform": ["model.depth=2", "model.width=64"],
    "x": ["model.depth=4", "model.width=64", "model.shape=x", "model.quantum=16", "model.head_dim=16"],
    "vwt-x": ["model=vwt", "model.depth=4", "model.width=96", "model.heads=4", "model.quantum=8", "model.shape=x"],
    "proj": [
        "model.depth=4",
        "model.width=64",
        "model.shape=x",
        "model.quantum=16",
        "model.head_dim=16",
        "model.resize=proj",
    ],
}


def _spec(name):
    return from_config(compose(CONFIGS[name]).model)


@pytest.mark.parametrize("name", list(CONFIGS) + ["rezero", "normformer", "tied"])
def test_param_shapes_are_the_built_models(name):
    from depthwidth.model.gpt import VariableWidthGPT

    extra = {
        "rezero": ["model.stabiliser=rezero"],
        "normformer": ["model.stabiliser=normformer"],
        "tied": ["model.tied=true"],
    }
    spec = from_config(compose(CONFIGS.get(name, CONFIGS["uniform"]) + extra.get(name, [])).model)
    m = VariableWidthGPT(spec, 16)
    assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == [(n, s) for _, n, s in param_shapes(spec)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


COUNT = r"""
import json, os, sys, torch
from depthwidth.config.compose import compose
from depthwidth.model.resolve import from_config
from depthwidth.model.gpt import VariableWidthGPT
from depthwidth.train import dist, parallel
w = dist.world_from_env(); dist.init(w, "cpu")
def storage_bytes(ts):  # every distinct storage once: what the allocator holds
    seen = {}
    for t in ts:
        t = parallel.local(t)
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())
for i, (mode, overrides) in enumerate(json.loads(sys.argv[1])):  # several layouts, one process group
    spec = from_config(compose(overrides).model)
    torch.manual_seed(0)
    m = VariableWidthGPT(spec, 16)
    fwd = parallel.apply(m, mode, torch.device("cpu"), "fp32")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    x = torch.randint(0, spec.vocab_size, (2, 16))
    _, loss = fwd(x, x); loss.backward()
    grads = storage_bytes([p.grad for p in m.parameters()])
    params = storage_bytes(list(m.parameters()))
    opt.step()
    optim = storage_bytes([v for st in opt.state.values() for v in st.values() if torch.is_tensor(v)])
    with open(os.path.join(sys.argv[2], f"case{i}-rank{w.rank}.json"), "w") as f:  # one file per rank
        json.dump({"rank": w.rank, "params": params, "grads": grads, "optimizer": optim}, f)
    del m, fwd, opt
dist.shutdown(w)
"""


@pytest.mark.parametrize(
    "n, cases", [(1, [("single", "x")]), (2, [("ddp", "x"), ("fsdp", "x"), ("fsdp", "vwt-x")]), (3, [("fsdp", "proj")])]
)
def test_static_bytes_equal_every_tensor_on_every_rank(tmp_path, n, cases):
    """One launch of n processes measures every layout of ``cases`` in turn."""
    script = tmp_path / "count.py"
    script.write_text(COUNT)
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO)), OMP_NUM_THREADS="1")
    out = tmp_path / "out"
    out.mkdir()
    cmd = [sys.executable, str(script), json.dumps([(mode, CONFIGS[name]) for mode, name in cases]), str(out)]
    if n > 1:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={n}",
            f"--master_port={_free_port()}",
            *cmd[1:],
        ]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    for i, (mode, name) in enumerate(cases):
        got = [json.loads(f.read_text()) for f in sorted(out.glob(f"case{i}-rank*.json"))]
        assert sorted(r["rank"] for r in got) == list(range(n)), (mode, name)
        spec = _spec(name)
        for r in got:
            want = memory.static_bytes(spec, mode, n, rank=r["rank"])
            assert {k: r[k] for k in want} == want, (mode, name, r["rank"])


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("ac", [False, True])
def test_activation_estimate_matches_what_autograd_saves(name, ac):
    """fp32 on the CPU: every saved tensor's storage counted once (parameters excluded)."""
    import torch

    from depthwidth.model.gpt import VariableWidthGPT
    from depthwidth.train.parallel import checkpoint_blocks

    spec = _spec(name)
    B, T = 2, 64
    m = VariableWidthGPT(spec, T)
    if ac:
        checkpoint_blocks(m)
    x = torch.randint(0, spec.vocab_size, (B, T))
    own = {p.untyped_storage().data_ptr() for p in m.parameters()} | {
        b.untyped_storage().data_ptr() for b in m.buffers()
    }
    saved: dict = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in own:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        _, loss = m(x, x)
    measured = sum(saved.values())
    if ac:  # the recomputed block's activations exist only inside its backward: add the largest block's
        measured += max(_one_block(spec, i, B, T) for i in range(spec.depth))
    planned = memory.activation_bytes(spec, B * T, "fp32", "cpu", ac)
    assert planned == pytest.approx(measured, rel=0.06), (planned, measured)


def _one_block(spec, i, B, T):
    import torch

    from depthwidth.model.gpt import Block, rope_tables

    blk = Block(spec, i)
    x = torch.randn(B, T, spec.input_width(i) if spec.resize == "proj" else spec.widths[i], requires_grad=True)
    cos, sin = rope_tables(spec.head_size(i), T, spec.rope_base)
    own = {p.untyped_storage().data_ptr() for p in blk.parameters()}
    saved: dict = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in own | {x.untyped_storage().data_ptr()}:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        blk(x, (cos, sin) if spec.rope else None)
    return sum(saved.values())


def test_layout_resolves_auto_by_memory():
    big = from_config(compose(["model.depth=32", "model.width=4096", "model.vocab_size=50257"]).model)
    kw = dict(
        seq_len=1024,
        batch_size=256,
        precision="bf16",
        device="cuda",
        capacity=GPU_MEMORY_GIB * memory.GiB,
        wsd_branches=False,
    )
    one = memory.layout(big, world=1, parallel="auto", micro_batch="auto", ac="auto", **kw)
    assert one.mode == "single" and not one.fits and "fsdp" in one.advice  # 7B on one 80 GiB GPU: no
    eight = memory.layout(big, world=8, parallel="auto", micro_batch="auto", ac="auto", **kw)
    assert eight.mode == "fsdp" and eight.fits and eight.micro_batch * eight.accum == 32
    assert eight.total <= GPU_MEMORY_GIB * memory.GiB
    small = from_config(compose(["model.depth=4", "model.width=256", "model.vocab_size=50257"]).model)
    s8 = memory.layout(small, world=8, parallel="auto", micro_batch="auto", ac="auto", **kw)
    assert s8.mode == "ddp" and s8.fits and s8.micro_batch == 32 and not s8.ac  # replicated fits: no sharding
    fixed = memory.layout(big, world=8, parallel="fsdp", micro_batch=32, ac="none", **kw)
    assert not fixed.fits and "train.activation_checkpointing=block" in fixed.advice


@pytest.mark.parametrize("sweep, n", [("depth_delusion", 30), ("vwt_shapes", 7)])
def test_the_shipped_sweeps_plan_every_run_within_80_gib_on_slurm(sweep, n):
    from tests.helpers import dw

    p = dw("sweep", sweep, "launcher=slurm", "--dry-run", "--no-data-check", "--json")
    assert p.returncode == 0, p.stderr
    runs = json.loads(p.stdout)["runs"]
    assert len(runs) == n
    for r in runs:
        plan = r["plan"]
        assert plan["fits"] and plan["capacity"] == 80 * 2**30 and plan["total"] <= plan["capacity"], r["index"]
        assert (
            plan["micro_batch"] * plan["accum"] * plan["processes"] == 256
        )  # both: 256 sequences per step (vwt: 256 x 4096 = 1M tokens, the 500M config)
        assert "train.precision=bf16" in r["overrides"]  # GPUs: bf16, pinned in the run's identity
    if sweep == "depth_delusion":  # the ~7B models do not fit replicated: sharded over the node's 8 GPUs
        big = [r for r in runs if r["params"] > 5e9]
        assert len(big) == 4 and all(r["plan"]["mode"] == "fsdp" and r["plan"]["processes"] == 8 for r in big)


def test_a_run_that_cannot_fit_is_refused_before_anything_is_written(tmp_path):
    from tests.helpers import assert_bad_input, dw

    p = dw(
        "sweep",
        "depth_delusion",
        "launcher=slurm",
        "launcher.gpus_per_node=1",
        "launcher.tasks_per_node=1",
        "--only",
        "model.width=4096",
        "--dry-run",
        "--no-data-check",
        env={"DW_RUNS": str(tmp_path / "runs")},
    )
    line = assert_bad_input(p)
    assert "run 20 (" in line and "GiB per device" in line and "launcher.gpu_memory is 80 GiB" in line
    assert "train.parallel=fsdp" in line and not (tmp_path / "runs").exists()
    # the same run fits when the devices are large enough
    p = dw(
        "sweep",
        "depth_delusion",
        "launcher=slurm",
        "launcher.gpus_per_node=1",
        "launcher.tasks_per_node=1",
        "launcher.gpu_memory=141",
        "--only",
        "model.depth=32",
        "--dry-run",
        "--no-data-check",
    )
    assert p.returncode == 0, p.stderr
