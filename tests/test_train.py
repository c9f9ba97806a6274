"""One training run end to end: real signals and kill -9 on real subprocesses, real files; the runs
that need no process of their own (references, resumes, bad input) run ``dw train`` in-process."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import assert_bad_input, dw, gate_env, REPO

TIMING = ("tokens_per_s", "mfu")  # wall-clock fields: the only ones allowed to differ
TINY = [
    "model.depth=2",
    "model.width=64",
    "train.batch_size=8",
    "train.seq_len=64",
    "train.threads=1",
    "train.log_every=5",
    "probe.every=10",
]


def _metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def _spawn(args, env=None, **kw):
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "depthwidth", "train", "--quiet", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def _wait_for(path: Path, timeout=120.0):
    t0 = time.time()
    while not path.exists():
        if time.time() - t0 > timeout:
            raise TimeoutError(path)
        time.sleep(0.005)


def test_train_writes_run_dir(tmp_path):
    d = tmp_path / "run"
    p = dw("train", *TINY, "train.steps=20", f"run.dir={d}", "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s == _summary(d)
    for key in ("status", "final_val_loss", "tokens", "params", "steps"):
        assert key in s
    assert s["status"] == "done" and s["steps"] == 20 and s["tokens"] == 20 * 8 * 64
    cfg = (d / "config.yaml").read_text()
    assert "run_id: " + s["run_id"] in cfg and "accounting:" in cfg and "flops_per_token" in cfg
    rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [5, 10, 15, 20]
    assert set(rows[0]) >= {"step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "mfu"}
    probes = [json.loads(x) for x in (d / "probes.jsonl").read_text().splitlines()]
    assert [r["step"] for r in probes] == [10, 20]
    for r in probes:
        for kind in ("block", "attn", "mlp"):
            assert len(r["grad_norm"][kind]) == 2 and all(math.isfinite(v) and v > 0 for v in r["grad_norm"][kind])
    # no temp files left behind by atomic writes
    assert not list(d.rglob("*.tmp"))
    # rerunning a finished run is a no-op that returns the same summary
    p2 = dw("train", *TINY, "train.steps=20", f"run.dir={d}", "--json")
    assert p2.returncode == 0 and json.loads(p2.stdout) == s


def test_sigkill_then_resume_is_exact(tmp_path):
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    args = [*TINY, "train.steps=40", "train.ckpt_every=20"]
    assert dw("train", *args, f"run.dir={ref}").returncode == 0
    gate = tmp_path / "gate"  # the run waits before step 25, past its step-20 checkpoint, to be killed there
    proc = _spawn([*args, f"run.dir={cut}"], env=gate_env(gate, 25))
    _wait_for(gate / f"at-25-{proc.pid}")
    assert (cut / "ckpt" / "step_00000020" / "MANIFEST").exists()  # complete once renamed into place
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert _summary(cut)["status"] == "running"  # killed: nobody wrote an end status
    p = dw("train", *args, f"run.dir={cut}")
    assert p.returncode == 0, p.stderr
    assert "resuming" in p.stderr and "from step 20" in p.stderr
    assert _metrics(cut) == _metrics(ref)
    a, b = _summary(ref), _summary(cut)
    assert a["final_val_loss"] == b["final_val_loss"] and a["budgets"] == b["budgets"]
    probes = lambda d: (d / "probes.jsonl").read_text()  # noqa: E731
    assert probes(cut) == probes(ref)


def test_sigusr2_checkpoints_and_exits_for_requeue(tmp_path):
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    args = [*TINY, "train.steps=40", "train.ckpt_every=100"]
    assert dw("train", *args, f"run.dir={ref}").returncode == 0
    gate = tmp_path / "gate"  # the run waits before step 10 until the signal reaches it
    proc = _spawn([*args, f"run.dir={cut}"], env=gate_env(gate, 10))
    _wait_for(gate / f"at-10-{proc.pid}")
    proc.send_signal(signal.SIGUSR2)
    proc.wait(timeout=120)
    assert proc.returncode == 3, proc.stderr.read()
    s = _summary(cut)
    assert s["status"] == "preempted" and "SIGUSR2" in s["reason"]
    ckpts = sorted((cut / "ckpt").glob("step_*"))
    assert len(ckpts) == 1 and int(ckpts[0].name.split("_")[1]) == s["steps"] == 11
    p = dw("train", *args, f"run.dir={cut}")
    assert p.returncode == 0, p.stderr
    assert _metrics(cut) == _metrics(ref)
    assert _summary(cut)["final_val_loss"] == _summary(ref)["final_val_loss"]


def test_truncated_newest_checkpoint_falls_back(tmp_path):
    d = tmp_path / "run"
    args = [*TINY, "train.steps=30", "train.ckpt_every=10", "train.keep_ckpts=3", f"run.dir={d}"]
    assert dw("train", *args).returncode == 0
    final = _summary(d)["final_val_loss"]
    ref_metrics = _metrics(d)
    newest = d / "ckpt" / "step_00000030" / "__0_0.distcp"
    newest.write_bytes(newest.read_bytes()[:1000])  # a torn write
    (d / "summary.json").unlink()  # pretend the run died before finishing
    p = dw("train", *args)
    assert p.returncode == 0, p.stderr
    assert "step_00000030 is corrupt" in p.stderr and "from step 20" in p.stderr
    assert _summary(d)["final_val_loss"] == final
    assert _metrics(d) == ref_metrics


@pytest.mark.parametrize(
    "data,vocab", [(["data=pydoc"], 256), (["data=synthetic", "data.vocab_size=16", "data.order=1"], 16)]
)
def test_loss_falls(tmp_path, data, vocab):
    d = tmp_path / "run"
    p = dw(
        "train",
        "model.depth=2",
        "model.width=64",
        "train.batch_size=16",
        "train.seq_len=64",
        "train.threads=1",  # one thread a run: two workers share the 2 cores of make test
        "train.steps=120",
        "optim.lr=3e-3",
        "train.log_every=10",
        "train.budgets=[10240]",
        *data,
        f"run.dir={d}",
    )
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["loss"] < rows[0]["loss"]
    # well below the uniform predictor's ln V
    assert _summary(d)["final_val_loss"] < math.log(vocab) - 0.5
    s = _summary(d)
    b = s["budgets"]
    assert [x["tokens"] for x in b] == [10240, 120 * 16 * 64]
    assert b[1]["val_loss"] < b[0]["val_loss"]
    if vocab == 16:
        assert s["bayes_loss"] is not None and s["bayes_loss"] < b[0]["val_loss"] and s["bayes_loss"] < b[1]["val_loss"]
    else:
        assert s["bayes_loss"] is None


def test_wsd_branch_equals_a_run_of_that_budget(tmp_path):
    """A decay branch at budget S_b is exactly the run one would have trained to S_b."""
    common = [*TINY, "optim.schedule=wsd", "optim.warmup=4", "optim.decay_fraction=0.25"]
    tps = 8 * 64
    main, short = tmp_path / "main", tmp_path / "short"
    assert dw("train", *common, "train.steps=40", f"train.budgets=[{16 * tps}]", f"run.dir={main}").returncode == 0
    assert dw("train", *common, "train.steps=16", f"run.dir={short}").returncode == 0
    branch = _summary(main)["budgets"][0]
    assert branch["step"] == 16
    assert branch["val_loss"] == _summary(short)["final_val_loss"]


def test_divergence_is_a_status_not_a_crash(tmp_path):
    d = tmp_path / "run"
    p = dw(
        "train",
        *TINY,
        "train.steps=40",
        "optim.lr=1e4",
        "optim.grad_clip=0",
        "optim.warmup=0",
        "optim.schedule=constant",
        f"run.dir={d}",
    )
    assert p.returncode == 1
    assert "Traceback" not in p.stderr
    s = _summary(d)
    assert s["status"] == "diverged" and s["diverged_step"] >= 1
    assert s["reason"].startswith("non-finite loss at step")


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["model.nonsense=1"], "model.nonsense"),
        (["data=memmap", "data.path=/nonexistent/tokens"], "/nonexistent/tokens"),
        (["model.vocab_size=300"], "vocabulary mismatch"),
        (["train.seq_len=10000000"], "10000000"),
        (["optim.schedule=linear"], "optim.schedule"),
        (["train.device=tpu"], "train.device"),
        (["train.eval_batches=0"], "train.eval_batches"),
        (["train.log_every=0"], "train.log_every"),
        (["train.threads=-1"], "train.threads"),
        (["run.seed=abc"], "run.seed"),
        (["optim.lr=abc"], "optim.lr"),
        (["optim.weight_decay=abc"], "optim.weight_decay"),
        (["model.ratio=abc", "model.shape=x"], "model.ratio"),
        (["train.budgets=abc"], "train.budgets"),
    ],
)
def test_bad_input_exit_2_nothing_written(tmp_path, extra, needle):
    d = tmp_path / "run"
    line = assert_bad_input(dw("train", *TINY, "train.steps=5", f"run.dir={d}", *extra))
    assert needle in line
    assert not d.exists()


def test_checkpoint_from_another_config_is_refused(tmp_path):
    d = tmp_path / "run"
    assert dw("train", *TINY, "train.steps=5", f"run.dir={d}").returncode == 0
    before = sorted(p.name for p in d.rglob("*"))
    line = assert_bad_input(dw("train", *TINY, "train.steps=5", "model.depth=3", f"run.dir={d}"))
    assert "different config" in line
    assert sorted(p.name for p in d.rglob("*")) == before


def test_non_finite_weights_are_never_checkpointed(tmp_path):
    import torch

    d = tmp_path / "run"
    p = dw(
        "train",
        *TINY,
        "train.steps=40",
        "optim.lr=1e4",
        "optim.grad_clip=0",
        "optim.warmup=0",
        "optim.schedule=constant",
        "train.ckpt_every=1",
        f"run.dir={d}",
    )
    assert p.returncode == 1 and _summary(d)["status"] == "diverged"
    from depthwidth.train import checkpoint

    ckpts = sorted((d / "ckpt").glob("step_*"))
    assert ckpts
    for ck in ckpts:
        state = checkpoint.read_model(ck)
        assert all(torch.isfinite(v).all() for v in state.values()), ck.name


def test_newer_corrupt_checkpoints_never_outlive_the_one_just_saved(tmp_path):
    import torch

    from depthwidth.train import checkpoint

    from depthwidth.train.dist import World

    d = tmp_path / "ckpt"
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters())
    checkpoint.save(d, 20, World(), model, opt, {"x": 1}, keep=1)
    next((d / "step_00000020").glob("*.distcp")).write_bytes(b"torn")
    assert checkpoint.latest(d, warn=lambda m: None) is None
    checkpoint.save(d, 10, World(), model, opt, {"x": 0}, keep=1)
    assert checkpoint.list_steps(d) == [10]
    assert checkpoint.load(checkpoint.latest(d), model, opt)["x"] == 0


def test_the_optimizer_is_fused_and_a_checkpoint_keeps_this_layouts_kernel(tmp_path):
    """dw's AdamW runs torch's fused kernel on plain tensors (train/optim.build_optimizer); a
    checkpoint written by the unfused kernel (every checkpoint before it) resumes with the
    fused kernel, its moments and step exactly as written, and steps as the unfused one would."""
    import torch

    from depthwidth.model.gpt import VariableWidthGPT
    from depthwidth.model.spec import ModelSpec
    from depthwidth.train import checkpoint, optim
    from depthwidth.train.dist import World

    class Hyper:
        lr, betas, eps, weight_decay = 1e-2, (0.9, 0.95), 1e-8, 0.1

    def model():
        torch.manual_seed(0)
        return VariableWidthGPT(ModelSpec(widths=(32, 16), vocab_size=17, embed_width=32, head_dim=16), 8)

    idx = torch.randint(0, 17, (2, 8), generator=torch.Generator().manual_seed(1))

    def step(m, opt):
        opt.zero_grad()
        m(idx, idx)[1].backward()
        opt.step()

    old = model()
    old_opt = optim.build_optimizer(old, Hyper)
    assert all(g["fused"] for g in old_opt.param_groups)
    for g in old_opt.param_groups:  # the kernel every checkpoint before this change was written with
        g["fused"] = None
    step(old, old_opt)
    checkpoint.save(tmp_path / "ckpt", 1, World(), old, old_opt, {}, keep=1)
    new = model()
    new_opt = optim.build_optimizer(new, Hyper)
    checkpoint.load(checkpoint.latest(tmp_path / "ckpt"), new, new_opt)
    assert all(g["fused"] for g in new_opt.param_groups)
    for p, q in zip(old.parameters(), new.parameters()):
        assert torch.equal(p, q)
        for k in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(old_opt.state[p][k], new_opt.state[q][k])
    step(old, old_opt), step(new, new_opt)
    for p, q in zip(old.parameters(), new.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_signal_in_the_last_step_finishes_the_run(tmp_path):
    """A stop signal that lands while the final step runs must not turn a
    finished run into a preempted one."""
    from depthwidth.config.compose import compose
    from depthwidth.train.trainer import train

    d = tmp_path / "run"
    cfg = compose([*TINY, "train.steps=3", f"run.dir={d}"])
    import depthwidth.train.optim as optim_mod

    real = optim_mod.lr_at

    def lr_and_signal(step, total, o, *rest):
        if step == total - 1:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives during the last step
        return real(step, total, o, *rest)

    optim_mod.lr_at = lr_and_signal
    try:
        s = train(cfg, log=lambda m: None)
    finally:
        optim_mod.lr_at = real
    assert s["status"] == "done" and s["steps"] == 3


@pytest.mark.parametrize("where", ["model", "tracker"])
def test_a_failed_set_up_writes_a_failed_summary(tmp_path, monkeypatch, where):
    """Set-up fails before the run directory exists (building the model: out of memory) or after
    it is open (config.yaml written, the tracker failing): the error reaches the caller, summary.json
    says failed and why, and the same call trains the run once the cause is gone."""
    import depthwidth.model.gpt as gpt
    from depthwidth.config.compose import compose
    from depthwidth.train import trainer

    def fail(*a, **kw):
        raise RuntimeError("CUDA out of memory (planted)")

    if where == "model":
        monkeypatch.setattr(gpt.VariableWidthGPT, "__init__", fail)
    else:
        monkeypatch.setattr(trainer, "make_tracker", fail)
    d = tmp_path / "run"
    args = [*TINY, "train.steps=3", f"run.dir={d}"]
    with pytest.raises(RuntimeError, match="planted"):
        trainer.train(compose(args), handle_signals=False, log=lambda m: None)
    s = _summary(d)
    assert (s["status"], s["reason"], s["steps"]) == ("failed", "RuntimeError: CUDA out of memory (planted)", 0)
    assert (d / "config.yaml").exists() == (where == "tracker")
    monkeypatch.undo()
    assert trainer.train(compose(args), handle_signals=False, log=lambda m: None)["status"] == "done"


def test_the_issue_example_trains(tmp_path):
    """The documented example: a 4-layer × model at width 128 (exact matching cannot
    reach 0.5% at whole heads of 64, so it warns and trains)."""
    d = tmp_path / "try1"
    p = dw(
        "train",
        "model=depth_delusion",
        "model.depth=4",
        "model.width=128",
        "model.shape=x",
        "data=pydoc",
        "optim.lr=3e-4",
        "train.steps=20",
        "train.batch_size=16",
        "train.seq_len=128",
        "train.ckpt_every=10",
        f"run.dir={d}",
        "run.seed=42",
        "train.threads=2",
    )
    assert p.returncode == 0, p.stderr
    assert "warning: model.match=exact" in p.stderr
    s = _summary(d)
    assert s["status"] == "done" and s["shape"] == "x" and s["widths"][0] == s["widths"][-1]
