"""Training at scale, on the CPU: gradient accumulation, activation
checkpointing, FSDP2 and DDP over 2 processes (torchrun, gloo) against one
process, and sharded checkpoints resumed on another number of processes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.helpers import dw, REPO

BASE = [
    "train.seq_len=32",
    "train.threads=1",
    "train.log_every=2",
    "probe.every=0",
    "optim.warmup=0",
    "optim.schedule=constant",
    "train.eval_batches=2",
]
MODELS = {
    "uniform": ["model.depth=2", "model.width=64"],
    "x": ["model.depth=4", "model.width=64", "model.shape=x", "model.quantum=16", "model.head_dim=16"],
    "proj": [
        "model.depth=4",
        "model.width=64",
        "model.shape=x",
        "model.quantum=16",
        "model.head_dim=16",
        "model.resize=proj",
    ],
    # MoE with its auxiliary loss: the expert counts are summed over processes, so two processes
    # train the model one does.  Micro-batches see only their own tokens' counts (as in lm-engine):
    # with accumulation only the routed computation can match, hence moe_noaux.
    "moe": [
        "model=vwt",
        "model.shape=x",
        "model.depth=4",
        "model.width=64",
        "model.quantum=16",
        "model.heads=4",
        "model.mlp=moe",
        "model.n_experts=4",
        "model.top_k=2",
        "model.expert_hidden=32",
    ],
}
MODELS["moe_noaux"] = [*MODELS["moe"], "model.aux_loss_coef=0"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _metrics(d):
    return [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]


def _torchrun(n, args, timeout=600, quiet=True):
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={n}",
            f"--master_port={_free_port()}",
            "-m",
            "depthwidth",
            "train",
            *(["--quiet"] if quiet else []),
            *args,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    """The 1-process run of each model, trained once for every layout compared with it."""
    done = {}

    def run(model):
        if model not in done:
            d = tmp_path_factory.mktemp(f"one-{model}")
            args = [*MODELS[model], *BASE, "train.batch_size=8", "train.steps=6"]
            assert dw("train", *args, f"run.dir={d}").returncode == 0
            done[model] = d
        return done[model]

    return run


@pytest.mark.parametrize("model", ["uniform", "x"])
def test_four_micro_batches_of_two_equal_one_batch_of_eight(tmp_path, one_process, model):
    args = [*MODELS[model], *BASE, "train.batch_size=8", "train.steps=6"]
    one, acc = one_process(model), tmp_path / "acc"
    p = dw("train", *args, "train.micro_batch_size=2", f"run.dir={acc}")
    assert p.returncode == 0, p.stderr
    assert "micro-batch 2 x 4" in p.stderr
    a, b = _metrics(one), _metrics(acc)
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], abs=2e-6)
        assert rb["grad_norm"] == pytest.approx(ra["grad_norm"], rel=1e-5)
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (one, acc))
    assert sb["run_id"] == sa["run_id"]  # how a step is split is not part of the run's identity
    assert sb["final_val_loss"] == pytest.approx(sa["final_val_loss"], abs=2e-6)


def test_activation_checkpointing_leaves_gradients_unchanged():
    import torch

    from depthwidth.config.compose import compose
    from depthwidth.model.gpt import VariableWidthGPT
    from depthwidth.model.resolve import from_config
    from depthwidth.train.parallel import checkpoint_blocks

    spec = from_config(compose(MODELS["x"]).model)
    x = torch.randint(0, spec.vocab_size, (3, 32))
    grads = []
    for ac in (False, True):
        torch.manual_seed(0)
        m = VariableWidthGPT(spec, 32).double()
        if ac:
            checkpoint_blocks(m)
        _, loss = m(x, x)
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
    assert grads[0].keys() == grads[1].keys()  # parameter names unchanged by the wrapper
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], rtol=0, atol=1e-12)


# DDP wraps any model alike, so its cases are the accumulation and the MoE counts; FSDP shards
# block by block, so every block kind (variable widths, projections, experts) has a case.
@pytest.mark.parametrize(
    "mode, model, micro",
    [
        ("fsdp", "x", None),
        ("fsdp", "proj", None),
        ("fsdp", "x", 2),
        ("ddp", "uniform", 2),
        ("fsdp", "moe", None),
        ("ddp", "moe", None),
        ("ddp", "moe_noaux", 2),
    ],
)
def test_two_processes_train_the_same_model_as_one(tmp_path, one_process, mode, model, micro):
    """micro=2: each process accumulates 2 micro-batches of 2 sequences (DDP syncs on the
    last; FSDP reduce-scatters each into the shards)."""
    args = [*MODELS[model], *BASE, "train.batch_size=8", "train.steps=6"]
    one, two = one_process(model), tmp_path / "two"
    extra = [f"train.micro_batch_size={micro}"] if micro else []
    p = _torchrun(2, [*args, *extra, f"train.parallel={mode}", f"run.dir={two}"])
    assert p.returncode == 0, p.stderr[-3000:]
    a, b = _metrics(one), _metrics(two)
    assert [r["step"] for r in a] == [r["step"] for r in b]  # rank 0 alone wrote, once
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], abs=1e-5)
        assert rb["grad_norm"] == pytest.approx(ra["grad_norm"], rel=1e-4)
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (one, two))
    assert sb["status"] == "done" and sb["final_val_loss"] == pytest.approx(sa["final_val_loss"], abs=1e-5)


def test_a_sharded_checkpoint_of_two_processes_resumes_on_one_and_on_two(tmp_path):
    args = [*MODELS["x"], *BASE, "train.batch_size=8", "train.ckpt_every=4", "train.keep_ckpts=5"]
    import shutil

    full = tmp_path / "full"
    p = _torchrun(2, [*args, "train.steps=8", "train.parallel=fsdp", f"run.dir={full}"])
    assert p.returncode == 0, p.stderr[-3000:]
    ckpt = full / "ckpt"
    assert sorted(x.name for x in ckpt.iterdir()) == ["step_00000004", "step_00000008"]
    assert len(list((ckpt / "step_00000004").glob("*.distcp"))) == 2  # each rank wrote its shards
    for d, n in ((tmp_path / "on2", 2), (tmp_path / "on1", 1)):
        shutil.copytree(full, d)
        shutil.rmtree(d / "ckpt" / "step_00000008")
        (d / "summary.json").unlink()  # as if killed after the step-4 checkpoint
        cmd = (
            _torchrun(2, [*args, "train.steps=8", "train.parallel=fsdp", f"run.dir={d}"], quiet=False)
            if n == 2
            else dw("train", *args, "train.steps=8", f"run.dir={d}")
        )
        assert cmd.returncode == 0, cmd.stderr[-3000:]
        assert "from step 4" in cmd.stderr
        a, b = _metrics(full), _metrics(d)
        assert [r["step"] for r in b] == [r["step"] for r in a]  # one history: nothing missing or repeated
        for ra, rb in zip(a, b):
            if n == 2:
                assert rb["loss"] == ra["loss"]  # same world size: exact continuation
            else:
                assert rb["loss"] == pytest.approx(ra["loss"], abs=1e-5)


def test_a_half_written_checkpoint_is_never_loaded(tmp_path):
    d = tmp_path / "run"
    args = [
        *MODELS["uniform"],
        *BASE,
        "train.batch_size=4",
        "train.ckpt_every=4",
        "train.keep_ckpts=5",
        "train.steps=8",
        f"run.dir={d}",
    ]
    assert dw("train", *args).returncode == 0
    import shutil

    shutil.rmtree(d / "ckpt" / "step_00000008")  # as if killed while saving step 8 ...
    # a save killed half-way leaves a .tmp directory; a manifest that does not match is corrupt
    (d / "ckpt" / ".step_00000008.tmp").mkdir()
    (d / "ckpt" / ".step_00000008.tmp" / "__0_0.distcp").write_bytes(b"partial")
    bad = d / "ckpt" / "step_00000006"
    shutil.copytree(d / "ckpt" / "step_00000004", bad)
    with open(bad / "__0_0.distcp", "r+b") as f:
        f.seek(100)
        f.write(b"\x00\x01\x02")
    (d / "summary.json").unlink()
    p = dw("train", *args)
    assert p.returncode == 0, p.stderr
    assert "step_00000006 is corrupt" in p.stderr and "resuming run" in p.stderr and "from step 4" in p.stderr
    assert not (d / "ckpt" / ".step_00000008.tmp").exists()
