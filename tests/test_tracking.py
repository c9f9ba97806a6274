"""tracker=wandb for real, in offline mode (there is no W&B server here).

What W&B recorded is read back from the offline ``.wandb`` files with W&B's own
reader, ``wandb leet inspect --json`` (one JSON object per protobuf record).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from depthwidth.core.atomic import read_jsonl
from depthwidth.track.wandb_log import history_steps, records
from tests.helpers import REPO, gate_env

TINY = [
    "model.depth=2",
    "model.width=64",
    "train.batch_size=8",
    "train.seq_len=64",
    "train.threads=1",
    "train.log_every=5",
    "probe.every=10",
]
TINY_SWEEP = """\
description: two tiny runs
fixed: {model.width: 32, model.quantum: 8, model.head_dim: 16, train.seq_len: 32, train.batch_size: 4,
        train.steps: 10, train.log_every: 5, train.threads: 1, probe.every: 5, probe.at: []}
axes:
  model.depth: [1, 2]
"""
FAKE_KEY = "0123456789abcdef0123456789abcdef01234567"


def wandb_env(tmp_path: Path, **extra) -> dict:
    """No key, no login: tracker=wandb must choose offline by itself."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    e.update(
        {
            "PYTHONPATH": str(REPO),
            "NETRC": str(tmp_path / "no-netrc"),
            "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache"),
            "WANDB_DATA_DIR": str(tmp_path / "wandb-data"),
            "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
        }
    )
    e.update(extra)
    return e


def run_dw(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "depthwidth", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def inspect(wandb_file: Path) -> dict:
    """config, history rows (in order) and merged summary of one .wandb file, via wandb's reader."""
    out = {"run": None, "history": [], "summary": {}, "exit": None}
    for r in records(wandb_file):
        kind = r["type"]
        if kind == "run":
            out["run"] = r["run"]
        elif kind == "history":
            out["history"].append(r["history"]["item"])
        elif kind == "summary":
            out["summary"].update(r["summary"].get("update", {}))
        elif kind == "exit":
            out["exit"] = r["exit"]
    return out


def segments(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))


def jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_sweep_one_offline_wandb_run_per_dw_run(tmp_path):
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "tiny.yaml").write_text(TINY_SWEEP)
    env = wandb_env(tmp_path, DW_RUNS=str(tmp_path / "runs"), DW_SWEEPS=str(tmp_path / "sweeps"))
    p = run_dw("sweep", "tiny", "tracker=wandb", "tracker.probes=both", "launcher=debug", env=env)
    assert p.returncode == 0, p.stderr
    assert "warning" not in p.stderr.lower()
    run_dirs = sorted(d for d in (tmp_path / "runs" / "tiny").iterdir() if (d / "summary.json").exists())
    assert len(run_dirs) == 2
    for d in run_dirs:
        s = json.loads((d / "summary.json").read_text())
        segs = segments(d)
        assert len(segs) == 1 and segs[0].name == f"run-{s['run_id']}.wandb"
        w = inspect(segs[0])
        run = w["run"]
        assert run["run_id"] == s["run_id"] and run["run_group"] == "tiny" and run["job_type"] == "uniform"
        assert run["display_name"] == f"{s['depth']}L×32W"
        cfg = run["config"]["update"]
        assert cfg["model"]["depth"] == s["depth"] and cfg["run_id"] == s["run_id"]
        assert cfg["accounting"]["params"] == s["params"]
        assert cfg["accounting"]["flops_per_token"] == s["flops_per_token"]
        assert cfg["accounting"]["kv_bytes_per_token"] == s["kv_bytes_per_token"]
        prov = cfg["provenance"]  # the run's provenance, as in config.yaml and summary.json
        assert prov["git"] == s["provenance"]["git"] and prov["precision"] == "fp32" and prov["device"] == "cpu"
        assert (
            set(prov["versions"]) == {"python", "torch", "numpy", "scipy"} and prov["data"] == s["provenance"]["data"]
        )
        assert prov["job_id"] == s["provenance"]["job_id"] and prov["job_id"].startswith("debug-")
        # history: the same rows as metrics.jsonl, probes as per-layer histograms
        metrics = jsonl(d / "metrics.jsonl")
        assert [h["_step"] for h in w["history"]] == [m["step"] for m in metrics] == [5, 10]
        for h, m in zip(w["history"], metrics):
            for k in ("loss", "lr", "tokens", "grad_norm", "tokens_per_s"):
                assert h[k] == m[k]
            assert len(h["probes/grad_norm/block.values"]) == s["depth"]
            assert h["probes/layers._type"] == "table-file" and h["probes/layers.nrows"] == s["depth"]
        probes = jsonl(d / "probes.jsonl")
        assert w["history"][-1]["probes/grad_norm/mlp.values"] == probes[-1]["grad_norm"]["mlp"]
        # summary: status, final held-out loss, token-budget points
        assert w["summary"]["status"] == "done"
        assert w["summary"]["final_val_loss"] == s["final_val_loss"]
        assert w["summary"]["budgets"] == s["budgets"]
        assert w["exit"]["exit_code"] == 0


def _spawn(args, env):
    return subprocess.Popen(
        [sys.executable, "-m", "depthwidth", "train", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(cond, timeout=120.0):
    t0 = time.time()
    while not cond():
        assert time.time() - t0 < timeout, "timed out"
        time.sleep(0.005)


def _history_steps(run_dir: Path) -> tuple[list[int], set]:
    steps, ids = [], set()
    for f in segments(run_dir):
        w = inspect(f)
        if w["run"] is not None:  # a segment killed before W&B's first write holds nothing
            ids.add(w["run"]["run_id"])
        steps += [h["_step"] for h in w["history"]]
    return steps, ids


def test_killed_run_resumes_the_same_wandb_run_without_repeats(tmp_path):
    d = tmp_path / "run"
    args = [*TINY, "train.steps=60", "train.ckpt_every=20", "tracker=wandb", f"run.dir={d}"]
    env = wandb_env(tmp_path)
    gate = tmp_path / "gate"  # killed before step 25: past the step-20 checkpoint, with rows past it logged
    proc = _spawn(args, {**env, **gate_env(gate, 25)})
    _wait_for(lambda: (gate / f"at-25-{proc.pid}").exists())
    assert (d / "ckpt" / "step_00000020" / "MANIFEST").exists() and len(read_jsonl(d / "metrics.jsonl")) >= 5
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    p = run_dw("train", *args, env=env)
    assert p.returncode == 0, p.stderr
    assert "resuming" in p.stderr and "warning" not in p.stderr.lower()
    steps, ids = _history_steps(d)
    assert len(segments(d)) == 2 and ids == {json.loads((d / "summary.json").read_text())["run_id"]}
    assert steps == list(range(5, 61, 5))  # strictly increasing, none missing, none repeated
    assert [m["step"] for m in jsonl(d / "metrics.jsonl")] == steps


def _children(pid: int) -> list[tuple[int, str]]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                out.append((int(stat.parent.name), cmd))
        except (OSError, ValueError, IndexError):
            continue
    return out


def test_wandb_failure_mid_run_training_finishes(tmp_path):
    """The W&B service process dies mid-run (we kill it): one warning, run complete."""
    d = tmp_path / "run"
    args = [*TINY, "train.steps=60", "tracker=wandb", f"run.dir={d}"]
    proc = _spawn(args, wandb_env(tmp_path))
    core: list = []

    def ready():
        core[:] = [pid for pid, cmd in _children(proc.pid) if "wandb-core" in cmd]
        return bool(core) and (d / "probes.jsonl").exists()

    _wait_for(ready)
    os.kill(core[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    flat = " ".join(err.split())  # rich wraps long lines
    assert flat.count("warning: W&B") == 1 and flat.count("continuing without W&B") == 1, err
    assert "Traceback" not in err
    s = json.loads((d / "summary.json").read_text())
    assert s["status"] == "done" and s["steps"] == 60
    assert [m["step"] for m in jsonl(d / "metrics.jsonl")] == list(range(5, 61, 5))
    assert [m["step"] for m in jsonl(d / "probes.jsonl")] == list(range(10, 61, 10))
    assert json.loads((d / "summary.json").read_text())["final_val_loss"] is not None


def test_wandb_failure_at_start_training_finishes_and_key_stays_out(tmp_path):
    """Online with a key but an unreachable server: falls back to offline; then a W&B
    directory that cannot be created: local only.  The key is never written anywhere."""
    tiny = [
        "model.depth=2",
        "model.width=64",
        "train.batch_size=8",
        "train.seq_len=64",
        "train.threads=1",
        "train.log_every=5",
        "probe.every=10",
        "train.steps=10",
        "tracker=wandb",
        "tracker.init_timeout=3",
    ]
    env = wandb_env(tmp_path, WANDB_API_KEY=FAKE_KEY, WANDB_BASE_URL="http://127.0.0.1:9")
    a = tmp_path / "a"
    p = pa = run_dw("train", *tiny, f"run.dir={a}", "--json", env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["status"] == "done"  # stdout stays pure JSON
    flat = " ".join(p.stderr.split())  # rich wraps long lines
    assert flat.count("W&B online start failed") == 1 and "dw sync" in flat and "Traceback" not in flat
    assert len(segments(a)) == 1 and [h["_step"] for h in inspect(segments(a)[0])["history"]] == [5, 10]

    b = tmp_path / "b"
    b.mkdir()
    (b / "wandb").write_text("not a directory")  # W&B cannot write its files
    env_off = wandb_env(tmp_path, WANDB_API_KEY=FAKE_KEY)
    p = run_dw("train", *tiny, "tracker.mode=offline", f"run.dir={b}", env=env_off)
    assert p.returncode == 0, p.stderr
    flat = " ".join(p.stderr.split())
    assert flat.count("warning: W&B") == 1 and "Traceback" not in flat
    s = json.loads((b / "summary.json").read_text())
    assert s["status"] == "done"
    assert [m["step"] for m in jsonl(b / "metrics.jsonl")] == [5, 10]
    for out in (pa.stdout, pa.stderr, p.stdout, p.stderr):
        assert FAKE_KEY not in out
    for f in [*a.rglob("*"), *b.rglob("*")]:
        if f.is_file() and not f.is_symlink():
            assert FAKE_KEY.encode() not in f.read_bytes(), f


def _steps_in(files) -> list[int]:
    return [s for f in files for s in history_steps(f)]


def test_mirror_skips_what_wandb_holds_and_backfills_what_it_lost(tmp_path, monkeypatch):
    """In process, real W&B offline: the two resume cases, made deterministic."""
    import wandb

    from depthwidth.config.compose import compose
    from depthwidth.track.tracker import make_tracker

    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(k)
    for k, v in wandb_env(tmp_path).items():
        if k.startswith("WANDB_") or k == "NETRC":
            monkeypatch.setenv(k, v)
    cfg = compose(["tracker=wandb", "model.depth=2", "model.width=64", "run.sweep=unit"])
    doc = {"model": {"depth": 2, "width": 64, "shape": "uniform"}, "run": {"sweep": "unit", "seed": 1}}
    d, warnings = tmp_path / "run", []

    def segment(resume: int, until: int, status: str):
        t = make_tracker(cfg, d, "rid", doc, log=warnings.append)
        t.rewind(resume)
        for s in range(resume + 5, until + 1, 5):
            t.log({"step": s, "tokens": 100 * s, "loss": 1.0 / s})
            if s % 10 == 0:
                t.log_probe({"step": s, "tokens": 100 * s, "grad_norm": {"block": [0.5, float(s)]}})
            t.flush()
        t.finish({"status": status, "final_val_loss": None})
        wandb.teardown()  # as at process exit: W&B's service writes out its files and stops

    d.mkdir()
    try:
        segment(0, 30, "preempted")  # W&B holds 5..30
        segment(20, 40, "preempted")  # resumed from a step-20 checkpoint: 25, 30 replayed, not resent
        assert _steps_in(segments(d)) == list(range(5, 41, 5))
        # a kill before W&B wrote anything of the last segment: it lost 35, 40
        segs = segments(d)
        segs[-1].write_bytes(segs[-1].read_bytes()[:7])
        segment(40, 50, "done")  # resumed at 40: 35, 40 come back from metrics.jsonl / probes.jsonl
    finally:
        wandb.teardown()
    assert warnings == []
    steps = _steps_in(segments(d))
    assert steps == list(range(5, 51, 5))
    last = [r["history"]["item"] for r in records(segments(d)[-1]) if r["type"] == "history"]
    assert last[1]["loss"] == 1.0 / 40 and last[1]["probes/grad_norm/block.values"] == [0.5, 40]


def test_run_names_and_job_types():
    from depthwidth.track.mirror import run_name, shape_family

    def doc(shape, widths=None, seed=3):
        return {"model": {"depth": 24, "width": 960, "shape": shape, "widths": widths}, "run": {"seed": seed}}

    assert run_name({"model": {"depth": 16, "width": 512, "shape": "uniform"}}) == "16L×512W"
    assert run_name(doc("x")) == "×-960h-24L" and run_name(doc("×")) == "×-960h-24L"
    assert [run_name(doc(s)) for s in ("increasing", "decreasing", "diamond")] == [
        "<-960h-24L",
        ">-960h-24L",
        "◇-960h-24L",
    ]
    assert run_name(doc("x"), seed_in_name=True) == "×-960h-24L-s3"
    assert shape_family(doc("×")["model"]) == "x" and shape_family(doc("x", widths=[64] * 24)["model"]) == "custom"


def test_bad_tracker_settings_are_bad_input(tmp_path):
    import pytest

    from depthwidth.config.compose import compose
    from depthwidth.core.errors import BadInput
    from depthwidth.track.tracker import validate
    from tests.helpers import assert_bad_input

    for extra, needle in (
        (["tracker.mode=sometimes"], "tracker.mode"),
        (["tracker.project=a/b"], "tracker.project"),
        (["tracker.init_timeout=0"], "tracker.init_timeout"),
        (["tracker.probes=all"], "tracker.probes"),
    ):
        with pytest.raises(BadInput, match=needle):
            validate(compose(["tracker=wandb", *extra]))
    validate(compose(["tracker=wandb"]))
    validate(compose([]))
    p = run_dw(
        "train",
        *TINY,
        "train.steps=5",
        "tracker=wandb",
        "tracker.mode=sometimes",
        f"run.dir={tmp_path / 'r'}",
        env=wandb_env(tmp_path),
    )
    assert "tracker.mode" in assert_bad_input(p)


def test_a_segment_wandb_cannot_read_turns_the_mirror_off_loudly(tmp_path, monkeypatch):
    """A .wandb file W&B's reader refuses (here: a foreign header, as a format change would
    give) must not be guessed around: the mirror says so once and the run keeps its files."""
    import pytest

    from depthwidth.config.compose import compose
    from depthwidth.track.tracker import make_tracker
    from depthwidth.track.wandb_log import WandbLogError, last_history_step

    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(k)
    for k, v in wandb_env(tmp_path).items():
        if k.startswith("WANDB_") or k == "NETRC":
            monkeypatch.setenv(k, v)
    d = tmp_path / "run"
    seg = d / "wandb" / "offline-run-20260101_000000-rid" / "run-rid.wandb"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(b"NOTW&B\x00" + bytes(64))
    with pytest.raises(WandbLogError, match="invalid W&B identifier"):
        last_history_step([seg])
    warnings = []
    t = make_tracker(
        compose(["tracker=wandb", "run.sweep=unit"]), d, "rid", {"run": {"sweep": "unit"}}, log=warnings.append
    )
    t.rewind(10)
    t.log({"step": 15, "tokens": 1, "loss": 1.0})
    t.flush()
    t.finish({"status": "done"})
    assert len(warnings) == 1 and "W&B read of the earlier offline segments failed" in warnings[0]
    assert "invalid W&B identifier" in warnings[0] and "continuing without W&B" in warnings[0]
    assert [r["step"] for r in read_jsonl(d / "metrics.jsonl")] == [15]
    assert len(segments(d)) == 1  # no new segment written beside the one it could not read
