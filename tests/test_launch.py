"""debug and local launchers end to end, resubmission rules, packing (tiny CPU runs)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from depthwidth.launch import config as launch_config
from depthwidth.launch import scheduler
from depthwidth.launch import submit as launch_submit
from depthwidth.launch import task as launch_task
from depthwidth.core import store
from depthwidth.core.atomic import read_jsonl, write_json
from tests.helpers import dw, run_dw

TINY = """\
groups: {model: vwt, data: pydoc}
fixed: {model.heads: 4, model.shape: uniform, train.seq_len: 32, train.batch_size: 4, train.steps: STEPS,
        train.log_every: 4, train.ckpt_every: 4, train.threads: 1, train.eval_batches: 2,
        probe.every: 0, probe.at: []}
axes: {model.width: WIDTHS, model.depth: DEPTHS}
"""


def tiny_env(tmp_path, steps=12, widths="[32]", depths="[1, 2]"):
    d = tmp_path / "sweeps"
    d.mkdir(exist_ok=True)
    (d / "tiny.yaml").write_text(TINY.replace("STEPS", str(steps)).replace("WIDTHS", widths).replace("DEPTHS", depths))
    return {"DW_SWEEPS": str(d), "DW_RUNS": str(tmp_path / "runs")}


def status(env):
    """dw status --json, in this process: the tests poll it while runs train, and a new interpreter
    each time would take CPU from them."""
    p = dw("status", "tiny", "--json", env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def wait_for(pred, timeout, what):
    t0 = time.monotonic()
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_debug_runs_in_process_then_skips_done_and_retries_only_failed(tmp_path):
    env = tiny_env(tmp_path)
    p = run_dw("sweep", "tiny", "--json", env=env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert len(out["submitted"]) == 2 and out["launcher"] == "debug"
    ev = read_jsonl(tmp_path / "runs" / "tiny" / "manifest")
    subs = [e for e in ev if e["event"] == "submit"]
    assert len(subs) == 2 and len([e for e in ev if e["event"] == "start"]) == 2
    for e in subs:
        assert e["job_id"].startswith("debug-") and "model.heads=4" in e["overrides"]
        assert e["run_dir"].endswith(e["run_id"]) and f"run.dir={e['run_dir']}" in e["overrides"]
    st = status(env)
    assert st["counts"]["done"] == 2
    assert all(r["attempts"] == 1 and r["progress"] == 1.0 and r["last_loss"] for r in st["runs"])
    # the run's overrides reproduce it with `dw train`: same run id, nothing to do
    r0 = st["runs"][0]
    t = run_dw("train", *r0["overrides"], "--json", env=env)
    assert t.returncode == 0 and json.loads(t.stdout)["run_id"] == r0["run_id"]

    again = json.loads(run_dw("sweep", "tiny", "--json", env=env).stdout)
    assert again["submitted"] == [] and again["skipped"] == {"done": 2}

    # one run failed, one diverged: --retry-failed resubmits the failed one only (tests/reliability covers
    # --retry-diverged)
    summaries = [Path(r["run_dir"]) / "summary.json" for r in st["runs"]]
    for path, new in zip(summaries, ("failed", "diverged")):
        s = json.loads(path.read_text())
        write_json(path, {**s, "status": new})
    assert {r["state"] for r in status(env)["runs"]} == {"failed", "diverged"}
    assert json.loads(run_dw("sweep", "tiny", "--json", env=env).stdout)["submitted"] == []
    retry = json.loads(run_dw("sweep", "tiny", "--retry-failed", "--json", env=env).stdout)
    assert len(retry["submitted"]) == 1 and retry["skipped"] == {"diverged": 1}
    st = status(env)
    assert st["counts"]["done"] == 1 and st["counts"]["diverged"] == 1
    assert [r["attempts"] for r in st["runs"]] == [2, 1]


def test_local_returns_at_once_packs_and_completes(tmp_path):
    env = tiny_env(tmp_path, steps=16, widths="[32, 64]")
    p = run_dw("sweep", "tiny", "launcher=local", "launcher.workers=2", "pack=2", "--json", env=env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert len(out["submitted"]) == 4 and len(out["jobs"]) == 2  # 4 runs packed into 2 tasks
    # it returned at once: before its workers finished (an event, not a wall-clock bound)
    first = [
        json.loads(p.read_text()) for p in next((tmp_path / "runs" / "tiny" / "jobs").iterdir()).glob("worker-*.json")
    ]
    assert first and any(scheduler.pid_alive(w.get("pid")) for w in first)
    st = wait_for(lambda: (s := status(env))["counts"]["done"] == 4 and s, 120, "4 runs done")
    assert {r["job_id"] for r in st["runs"]} == set(out["jobs"])
    sub = next((tmp_path / "runs" / "tiny" / "jobs").iterdir())
    workers = [json.loads(p.read_text()) for p in sub.glob("worker-*.json")]
    assert len(workers) == 2
    wait_for(lambda: all(not scheduler.pid_alive(w["pid"]) for w in workers), 120, "workers to exit")


def test_a_killed_local_worker_leaves_lost_runs_that_retry_resubmits(tmp_path):
    from tests.helpers import gate_env

    env = tiny_env(tmp_path, steps=16)
    gate = tmp_path / "gate"  # the first run waits before step 7 until the worker is killed: never done first
    p = run_dw("sweep", "tiny", "launcher=local", "launcher.workers=1", "--json", env={**env, **gate_env(gate, 6)})
    assert p.returncode == 0, p.stderr
    pid = _held(gate, 6)
    sub = next((tmp_path / "runs" / "tiny" / "jobs").iterdir())
    assert json.loads((sub / "worker-0.json").read_text())["pid"] == pid  # the run trains inside the worker
    os.kill(pid, signal.SIGKILL)  # the worker this test started, held at the gate
    st = wait_for(
        lambda: (s := status(env))["counts"]["running"] + s["counts"]["pending"] == 0 and s, 30, "no live job"
    )
    lost = {r["run_id"] for r in st["runs"] if r["state"] == "lost"}
    assert len(lost) == st["counts"]["lost"] == 2  # the run killed at the gate and the one never started
    assert json.loads(run_dw("sweep", "tiny", "--json", env=env).stdout)["submitted"] == []
    retry = json.loads(run_dw("sweep", "tiny", "--retry-failed", "--json", env=env).stdout)
    assert {x["run_id"] for x in retry["submitted"]} == lost and retry["launcher"] == "debug"
    assert status(env)["counts"]["done"] == 2


def test_launcher_config_merges_overrides():
    cfg = launch_config.launcher_config(
        ["launcher=slurm", "launcher.partition=gpu", "pack=3", "launcher.additional.exclude='n[1-2]'"],
        need_scheduler=False,
    )
    assert (cfg["name"], cfg["partition"], cfg["pack"], cfg["additional"]) == ("slurm", "gpu", 3, {"exclude": "n[1-2]"})


def test_submitit_sbatch_file_has_the_array_resources_requeue_and_signal(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    from submitit.slurm.slurm import _make_sbatch_string

    from depthwidth.launch import slurm as launch_slurm

    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    cfg = launch_config.launcher_config(
        [
            "launcher=slurm",
            "launcher.partition=gpu",
            "launcher.account=lab",
            "launcher.qos=high",
            "launcher.gpus_per_node=4",
            "launcher.mem=64G",
            "launcher.time=48:00:00",
            "launcher.constraint=h100",
            "launcher.array_parallelism=8",
            "launcher.cpus_per_task=8",
            "launcher.setup=['module load cuda']",
            "launcher.additional.exclude='n[1-2]'",
        ],
        need_scheduler=False,
    )
    params = launch_slurm.parameters("dd", cfg)
    # what SlurmExecutor.map_array writes for a 30-task array (map_count is set by map_array)
    text = _make_sbatch_string(command="python -u -m submitit.core._submit F", folder=tmp_path, map_count=30, **params)
    for line in (
        "--array=0-29%8",
        "--partition=gpu",
        "--account=lab",
        "--qos=high",
        "--gpus-per-node=4",
        "--ntasks-per-node=4",
        "--mem=64G",
        "--time=2880",
        "--constraint=h100",
        "--cpus-per-task=8",
        "--exclude='n[1-2]'",
        "--job-name=dw-dd",
        "#SBATCH --requeue",
        "--signal=USR2@120",
        "trap '' USR2",
        "module load cuda",
        "srun --unbuffered",
        "MASTER_ADDR",
        "MASTER_PORT",
        f"DW_RUNS={tmp_path}",
    ):
        assert line in text, line
    assert "B:USR2" not in text  # the steps (python under srun) get the warning, not the batch shell
    one = launch_slurm.parameters("dd", launch_config.launcher_config(["launcher=slurm"], need_scheduler=False))
    assert one["ntasks_per_node"] == 1 and "gpus_per_node" not in one and one["time"] == 60
    assert launch_slurm.MAX_NUM_TIMEOUT >= 10_000


@pytest.mark.parametrize(
    "t,m",
    [
        (90, 90),
        ("90", 90),
        ("01:00:00", 60),
        ("48:00:00", 2880),
        ("30:00", 30),
        ("0:30", 1),
        ("1-00:00:00", 1440),
        ("2-12", 3600),
        ("1-2:30", 1590),
    ],
)
def test_slurm_time_in_minutes(t, m):
    pytest.importorskip("submitit")
    from depthwidth.launch.slurm import time_minutes

    assert time_minutes(t) == m


def test_task_sets_torch_distributed_env_from_slurm(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.setenv(k, "")  # so that monkeypatch restores them afterwards
        monkeypatch.delenv(k)
    monkeypatch.setenv("SLURM_NTASKS", "4")
    monkeypatch.setenv("SLURM_PROCID", "2")
    monkeypatch.setenv("SLURM_LOCALID", "2")
    launch_task._distributed_env()
    assert (os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"]) == ("2", "4", "2")


def test_failed_slurm_submission_leaves_nothing_behind(tmp_path, monkeypatch):
    """sbatch refusing the array (e.g. no controller) is work that failed: exit 1,
    no half-written submission folder, no manifest events."""
    import pytest as _pytest

    from depthwidth.core.errors import WorkFailed
    from depthwidth.launch import slurm_waves

    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))

    def refuse(*a, **k):
        raise WorkFailed("sbatch: error: Batch job submission failed: Unable to contact slurm controller")

    monkeypatch.setattr(slurm_waves, "submit_array", refuse)
    items = [
        {
            "run_id": "r1",
            "overrides": ["train.steps=1"],
            "run_dir": str(tmp_path / "runs/s/r1"),
            "label": None,
            "ref": None,
            "tokens_total": 1,
            "params": 1,
            "index": 0,
        }
    ]
    with _pytest.raises(WorkFailed):
        launch_submit.submit("s", items, {"name": "slurm", "pack": 1})
    jobs = store.jobs_dir("s")
    assert not jobs.exists() or not any(jobs.iterdir())
    assert store.read_manifest("s") == []


def test_local_workers_get_one_group_of_gpus_per_run():
    """(No GPU here: the grouping of visible GPU ids into workers is what is tested.)"""
    from depthwidth.launch.workers import gpu_slots

    assert [s["CUDA_VISIBLE_DEVICES"] for s in gpu_slots(list("01234567"), 4)] == ["0,1,2,3", "4,5,6,7"]
    assert [s["CUDA_VISIBLE_DEVICES"] for s in gpu_slots(list("01234"), 2)] == ["0,1", "2,3"]  # GPU 4 stays idle
    assert gpu_slots(list("0"), 2) == [] and gpu_slots(list("012"), 1)[2]["DW_GPUS_PER_RUN"] == "1"


def test_more_processes_than_gpus_per_node_is_refused():
    from depthwidth.core.errors import BadInput

    with pytest.raises(BadInput, match="launcher.tasks_per_node"):
        launch_config.launcher_config(
            ["launcher=slurm", "launcher.gpus_per_node=1", "launcher.tasks_per_node=8"], need_scheduler=False
        )
    cfg = launch_config.launcher_config(
        ["launcher=slurm", "launcher.nodes=2", "launcher.gpus_per_node=4"], need_scheduler=False
    )
    assert launch_config.processes(cfg) == 8  # 2 nodes x one process per GPU


# -- Ctrl-C (SIGINT) on a sweep's runs: preempted with a checkpoint, never lost ---------------------


def _rows(run_dir):
    from tests.test_train import TIMING

    return [{k: v for k, v in r.items() if k not in TIMING} for r in read_jsonl(Path(run_dir) / "metrics.jsonl")]


def _held(gate, step, timeout=120):
    """The pid of the process the gate holds before ``step``."""
    hit = wait_for(lambda: next(iter(gate.glob(f"at-{step}-*")), None), timeout, f"a run at the gate ({step})")
    return int(hit.name.rsplit("-", 1)[1])


def test_ctrl_c_on_a_local_worker_leaves_its_run_preempted_and_retry_failed_resumes_it(tmp_path):
    from tests.helpers import gate_env

    env = tiny_env(tmp_path, steps=16, depths="[2]")
    ref = {**env, "DW_RUNS": str(tmp_path / "ref")}
    assert run_dw("sweep", "tiny", env=ref).returncode == 0  # the same run, uninterrupted
    gate = tmp_path / "gate"  # the worker's run waits before step 7 (checkpoint at 4) for the signal
    p = run_dw("sweep", "tiny", "launcher=local", "launcher.workers=1", "--json", env={**env, **gate_env(gate, 6)})
    assert p.returncode == 0, p.stderr
    pid = _held(gate, 6)
    sub = next((tmp_path / "runs" / "tiny" / "jobs").iterdir())
    assert json.loads((sub / "worker-0.json").read_text())["pid"] == pid  # the run trains inside the worker
    os.kill(pid, signal.SIGINT)  # the worker this test started
    wait_for(lambda: not scheduler.pid_alive(pid), 120, "the worker to exit")
    st = status(env)
    (r,) = st["runs"]
    assert r["state"] == "preempted" and r["reason"] == "SIGINT at step 7", r
    assert (Path(r["run_dir"]) / "ckpt" / "step_00000007" / "MANIFEST").exists()
    assert (
        f"dw: interrupted run {r['run_id']} at step 7: checkpointed, summary preempted; "
        "dw sweep tiny --retry-failed resumes it"
    ) in (sub / "worker-0.log").read_text()
    again = json.loads(run_dw("sweep", "tiny", "--json", env=env).stdout)
    assert again["submitted"] == [] and again["skipped"] == {"preempted": 1}
    retry = json.loads(run_dw("sweep", "tiny", "--retry-failed", "--json", env=env).stdout)
    assert [x["run_id"] for x in retry["submitted"]] == [r["run_id"]]
    (done,) = status(env)["runs"]
    assert done["state"] == "done" and done["attempts"] == 2
    (want,) = status(ref)["runs"]
    assert _rows(done["run_dir"]) == _rows(want["run_dir"])  # resumed at step 7: nothing lost or repeated
    assert done["final_val_loss"] == want["final_val_loss"]


def test_ctrl_c_on_a_debug_sweep_preempts_the_run_cancels_the_rest_and_exits_3(tmp_path):
    import subprocess
    import sys

    from tests.helpers import REPO, gate_env

    env = tiny_env(tmp_path, steps=16)  # two runs, one task each, trained in the dw process
    gate = tmp_path / "gate"
    proc = subprocess.Popen(
        [sys.executable, "-m", "depthwidth", "sweep", "tiny"],
        cwd=REPO,
        env={**os.environ, **env, **gate_env(gate, 6)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert _held(gate, 6) == proc.pid
    proc.send_signal(signal.SIGINT)  # as Ctrl-C on the terminal would
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    first, second = status(env)["runs"]
    assert err.splitlines()[-1] == (
        f"dw: interrupted run {first['run_id']} at step 7: checkpointed, summary "
        "preempted; dw sweep tiny --retry-failed resumes it (and the 1 run not "
        "started, cancelled)"
    )
    assert "Traceback" not in err
    assert (first["state"], first["reason"], second["state"]) == ("preempted", "SIGINT at step 7", "cancelled")
    retry = json.loads(run_dw("sweep", "tiny", "--retry-failed", "--json", env=env).stdout)
    assert len(retry["submitted"]) == 2
    assert status(env)["counts"]["done"] == 2


def test_a_task_pickled_before_its_entry_was_handed_over_still_runs(monkeypatch):
    """A SLURM job queued by a dw whose SweepTask held only tasks.json (no entry) is requeued and
    unpickled by this one: it runs launch/task.py's array_task, as it did then."""
    import pickle

    from depthwidth.launch import slurm, task

    calls = []
    monkeypatch.setattr(task, "array_task", lambda f, i: calls.append((f, i)) or {"task": i, "rc": 0})
    old = object.__new__(slurm.SweepTask)
    old.__dict__.update({"tasks_file": "/x/tasks.json"})  # the state an older dw pickled
    back = pickle.loads(pickle.dumps(old))
    assert back(3) == {"task": 3, "rc": 0} and calls == [("/x/tasks.json", 3)]
