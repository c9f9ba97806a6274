"""``dw sweep --dry-run``: it refuses what the submission refuses (the data included) and says
what the sweep costs besides FLOPs: CPU- or GPU-hours by device, requeues against
launcher.time, nodes and calendar time at the launcher's parallelism, checkpoint disk, and
the warnings and advice that go with them (depthwidth/sweep/plan_costs.py)."""

from __future__ import annotations

import json
import math
import textwrap
from types import SimpleNamespace

import pytest

from depthwidth.sweep import plan_costs
from tests.helpers import assert_bad_input, dw

TINY = """
    groups: {model: depth_delusion, data: DATA}
    fixed: {model.depth: 2, model.width: 64, train.seq_len: 32, train.batch_size: 8, train.threads: 1}
    axes:
      train.steps: STEPS
"""


def _sweep(tmp_path, name="tiny", data="pydoc", steps=(300, 1000), extra="") -> dict:  # within 1 epoch of pydoc
    d = tmp_path / "sweeps"
    d.mkdir(exist_ok=True)
    text = textwrap.dedent(TINY).replace("DATA", data).replace("STEPS", json.dumps(list(steps))) + extra
    (d / f"{name}.yaml").write_text(text)
    return {"DW_SWEEPS": str(d), "DW_RUNS": str(tmp_path / "runs")}


def _json(p) -> dict:
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


# ---- the data: refused as the submission refuses it --------------------------------


def test_a_missing_dataset_is_refused_with_the_submissions_line_and_planned_only_on_request(tmp_path):
    env = _sweep(tmp_path, "mydocs", data="memmap")
    nope = tmp_path / "data" / "nope"
    real = assert_bad_input(dw("sweep", "mydocs", f"data.path={nope}", env=env))
    assert "does not exist" in real and str(nope) in real
    dry = assert_bad_input(dw("sweep", "mydocs", f"data.path={nope}", "--dry-run", env=env))
    # the same line, and how to plan before the data exist
    assert dry == real + "; to plan without the data: dw sweep mydocs --dry-run --no-data-check"
    assert not (tmp_path / "runs").exists()
    p = dw("sweep", "mydocs", f"data.path={nope}", "--dry-run", "--no-data-check", env=env)
    assert p.returncode == 0, p.stderr
    assert "dw: warning: 2 of 2 runs would be refused by the submission" in p.stderr and str(nope) in p.stderr
    doc = _json(dw("sweep", "mydocs", f"data.path={nope}", "--dry-run", "--no-data-check", "--json", env=env))
    assert len(doc["runs"]) == 2 and any("does not exist" in w for w in doc["warnings"])
    assert not (tmp_path / "runs").exists()
    # --no-data-check is for planning only
    assert "--no-data-check" in assert_bad_input(dw("sweep", "mydocs", "--no-data-check", env=env))


def test_data_that_exist_pass_the_dry_run_without_a_warning(tmp_path):
    p = dw("sweep", "tiny", "--dry-run", env=_sweep(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "warning" not in p.stderr


# ---- requeues against launcher.time ------------------------------------------------


def test_a_wall_time_over_launcher_time_warns_with_each_runs_requeues(tmp_path):
    env = _sweep(tmp_path)
    # one GPU per run at 1e8 FLOP/s: minutes of wall-time; launcher.time=00:00:01 is one whole minute for submitit
    args = [
        "sweep",
        "tiny",
        "launcher=slurm",
        "launcher.gpus_per_node=1",
        "launcher.time=00:00:01",
        "--peak",
        "1e8",
        "--mfu",
        "1",
        "--dry-run",
    ]
    doc = _json(dw(*args, "--json", env=env))
    want = []
    for r in doc["runs"]:
        wall_s = r["flops"] / 1e8  # one process
        assert abs(wall_s / 60 - round(wall_s / 60)) > 1e-6  # not on a boundary: the count is exact
        want.append(math.ceil(wall_s / 60) - 1)
        assert r["time_limit"] == "00:00:01" and r["time_limit_hours"] == 1 / 60
    assert [r["requeues"] for r in doc["runs"]] == want and all(want) and doc["requeues"] == sum(want)
    p = dw(*args, env=env)
    assert p.returncode == 0, p.stderr
    assert "requeues" in p.stdout
    line = next(ln for ln in p.stderr.splitlines() if "launcher.time" in ln)
    assert line.startswith("dw: warning: 2 of 2 runs plan more wall-time than launcher.time=00:00:01")
    assert f"{sum(want):,} in all, {max(want):,} for run 1 " in line
    # a limit every run fits in: no warning, no requeues
    doc = _json(dw(*[a.replace("00:00:01", "2-00:00:00") for a in args], "--json", env=env))
    assert [r["requeues"] for r in doc["runs"]] == [0, 0] and doc["warnings"] == []


# ---- nodes, calendar time and checkpoint disk --------------------------------------


def _planted(walls, label=None):
    return [SimpleNamespace(index=i, label=label, launcher={}) for i in range(len(walls))], [
        {"index": i, "wall_hours": w, "plan": {"processes": 8, "device": "cuda"}} for i, w in enumerate(walls)
    ]


@pytest.mark.parametrize(
    "pack, par, calendar",
    [
        (1, 2, 7.0),  # slots free at 5 | 3 -> 5 | 5 -> 7 | 5 -> 6: the last ends at 7
        (2, 2, 8.0),  # tasks 5+3, 2+2, 1: 8 | 4 -> 5
        (1, 1, 13.0),  # one after another: the sum
        (1, 64, 5.0),  # every task at once: the longest
    ],
)
def test_calendar_time_is_the_greedy_schedule_of_the_tasks_over_the_parallel_slots(pack, par, calendar):
    runs, rows = _planted([5, 3, 2, 2, 1])
    cfg = {"name": "slurm", "nodes": 2, "gpus_per_node": 4, "array_parallelism": par, "pack": pack, "gpu_memory": 80}
    for r in runs:
        r.launcher = cfg
    s = plan_costs.schedule(runs, rows)
    tasks = math.ceil(5 / pack)
    at_once = min(par, tasks)
    assert s["calendar_hours"] == calendar and s["tasks"] == tasks and s["at_once"] == at_once
    assert s["nodes"] == 2 * at_once and s["gpus"] == 8 * at_once


def test_two_job_arrays_run_at_once_and_their_nodes_add_up():
    a, ra = _planted([4, 4, 4])
    b, rb = _planted([10])
    for r in a:
        r.launcher = {"name": "slurm", "nodes": 1, "gpus_per_node": 1, "array_parallelism": 2, "pack": 1}
    for r in b:
        r.launcher = {"name": "slurm", "nodes": 1, "gpus_per_node": 8, "array_parallelism": 2, "pack": 1}
    s = plan_costs.schedule(a + b, ra + rb)
    assert [g["calendar_hours"] for g in s["groups"]] == [8.0, 10.0] and s["calendar_hours"] == 10.0
    assert (s["nodes"], s["gpus"], s["full_nodes"]) == (3, 2 + 8, 2)
    debug = {"name": "debug", "pack": 1}
    for r in a + b:
        r.launcher = debug
    assert plan_costs.schedule(a + b, ra + rb)["calendar_hours"] == 22.0  # launcher=debug: one after another


@pytest.mark.parametrize(
    "steps, every, keep, kept",
    [
        (250, 100, 2, 2),  # saves at 100, 200 and the end (250): the newest 2 kept
        (200, 100, 0, 2),  # 100, 200 (the end is one of them); keep_ckpts=0 keeps every save
        (250, 100, 0, 3),
        (5, 0, 2, 1),  # ckpt_every=0: only the end
    ],
)
def test_checkpoint_disk_is_12_bytes_a_parameter_times_the_checkpoints_kept(steps, every, keep, kept):
    from depthwidth.config.compose import compose
    from depthwidth.model.accounting import param_shapes
    from depthwidth.model.resolve import from_config

    spec = from_config(compose(["model.depth=2", "model.width=64"]).model)
    shapes = [s for _, _, s in param_shapes(spec)]
    n = sum(math.prod(s) for s in shapes)
    f = plan_costs.checkpoint_figures(spec, steps=steps, ckpt_every=every, keep=keep)
    assert f["ckpt_bytes"] == 12 * n + 4 * len(shapes)  # fp32 weights + two AdamW moments + a step per tensor
    assert f["ckpts_kept"] == kept and f["ckpt_disk_bytes"] == kept * f["ckpt_bytes"]


def test_the_dry_runs_schedule_and_disk_match_their_formulas(tmp_path):
    env = _sweep(tmp_path, steps=(300, 600, 900))
    doc = _json(
        dw(
            "sweep",
            "tiny",
            "launcher=slurm",
            "launcher.gpus_per_node=2",
            "launcher.array_parallelism=2",
            "train.keep_ckpts=0",
            "--dry-run",
            "--json",
            env=env,
        )
    )
    hours = [(r["flops_planned"] + r["flops_eval"]) / (0.4 * 989e12) / 3600 / 2 for r in doc["runs"]]
    assert [r["wall_hours"] for r in doc["runs"]] == hours  # 2 processes a run; training and evaluation
    w = [r["run_hours"] for r in doc["runs"]]  # SLURM: with its checkpoint writes (no requeue at this size)
    sc = doc["schedule"]
    assert sc["calendar_hours"] == max(w[0], w[1], min(w[0], w[1]) + w[2])
    assert (sc["tasks"], sc["at_once"], sc["nodes"], sc["gpus"]) == (3, 2, 2, 4)
    for r, steps in zip(doc["runs"], (300, 600, 900)):
        assert r["ckpts_kept"] == steps // 100 and r["ckpt_disk_bytes"] == r["ckpts_kept"] * r["ckpt_bytes"]
    assert doc["disk"]["total_bytes"] == sum(r["ckpt_disk_bytes"] for r in doc["runs"])
    assert doc["disk"]["max_run"] == 2 and doc["disk"]["max_run_bytes"] == doc["runs"][2]["ckpt_disk_bytes"]
    p = dw(
        "sweep",
        "tiny",
        "launcher=slurm",
        "launcher.gpus_per_node=2",
        "launcher.array_parallelism=2",
        "pack=3",
        "--dry-run",
        env=env,
    )
    assert p.returncode == 0, p.stderr
    assert "schedule: 1 array task in 1 job array (launcher.array_parallelism=2, pack=3): at most 1 at once" in p.stdout
    assert "checkpoints: 12 bytes per parameter" in p.stdout and "ckpt GiB" in p.stdout


def test_a_checkpoint_on_disk_is_the_planned_size(tmp_path):
    """What train/checkpoint.save writes against the plan: the same count, the tensors' bytes
    plus DCP's few kB per tensor (< 6% on this 0.5M-parameter model, negligible at scale)."""
    from depthwidth.config.compose import compose
    from depthwidth.model.resolve import from_config
    from depthwidth.train.trainer import train

    d = tmp_path / "run"
    cfg = compose(
        [
            "model.depth=2",
            "model.width=128",
            "train.batch_size=4",
            "train.seq_len=32",
            "train.threads=1",
            "train.steps=5",
            "train.ckpt_every=2",
            "train.keep_ckpts=0",
            "probe.every=0",
            "probe.at=[]",
            "data=synthetic",
            f"run.dir={d}",
        ]
    )
    train(cfg)
    f = plan_costs.checkpoint_figures(from_config(cfg.model), steps=5, ckpt_every=2, keep=0)
    dirs = sorted((d / "ckpt").glob("step_*"))
    assert len(dirs) == f["ckpts_kept"] == 3  # steps 2, 4 and the end
    for c in dirs:
        size = sum(p.stat().st_size for p in c.iterdir())
        assert f["ckpt_bytes"] <= size <= 1.06 * f["ckpt_bytes"], (c, size, f["ckpt_bytes"])


# ---- CPU-hours, a GPU-scale run on the CPU, the advice -----------------------------


def test_a_cpu_sweep_is_counted_in_cpu_hours(tmp_path):
    env = _sweep(tmp_path)
    for launcher in (["launcher=local", "launcher.gpus=none"], ["launcher=slurm", "launcher.gpus_per_node=0"]):
        doc = _json(dw("sweep", "tiny", *launcher, "--cpu-peak", "2e9", "--dry-run", "--json", env=env))
        assert doc["hours_unit"] == "CPU" and doc["cpu_peak_flops"] == 2e9
        for r in doc["runs"]:
            assert r["plan"]["device"] == "cpu" and r["gpu_hours"] == 0
            want = (r["flops_planned"] + r["flops_eval"]) / (0.4 * 2e9) / 3600
            assert r["cpu_hours"] == r["device_hours"] == want
        p = dw("sweep", "tiny", *launcher, "--cpu-peak", "2e9", "--dry-run", env=env)
        assert p.returncode == 0, p.stderr
        total = sum(r["cpu_hours"] for r in doc["runs"])
        assert f"≈ {plan_costs.short(total)} CPU-hours at MFU 40% of 2e+09 FLOP/s per CPU process" in p.stdout
        assert "CPU-h" in p.stdout and "GPU-h" not in p.stdout
    # 2 runs, 64 at once (SLURM: each run's calendar time, longruns.py)
    assert doc["schedule"]["calendar_hours"] == max(r.get("run_hours", r["wall_hours"]) for r in doc["runs"])
    local = _json(
        dw(
            "sweep",
            "tiny",
            "launcher=local",
            "launcher.gpus=none",
            "launcher.workers=1",
            "--dry-run",
            "--json",
            env=env,
        )
    )
    assert local["schedule"]["calendar_hours"] == pytest.approx(sum(r["wall_hours"] for r in local["runs"]))


def test_a_7b_model_planned_on_the_cpu_is_warned_about(tmp_path):
    p = dw(
        "sweep",
        "depth_delusion",
        "launcher=local",
        "launcher.gpus=none",
        "--only",
        "model.width=4608",
        "--dry-run",
        "--no-data-check",
        env={"DW_RUNS": str(tmp_path / "runs")},
    )
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stderr.splitlines() if "planned on the CPU" in ln)
    assert line.startswith("dw: warning: 1 of 1 runs are planned on the CPU (launcher.gpus=none; fp32, 1 process each)")
    assert "7.09B params" in line and "launcher=slurm" in line
    # on GPUs it is not
    p = dw(
        "sweep",
        "depth_delusion",
        "launcher=slurm",
        "--only",
        "model.width=4608",
        "--dry-run",
        "--no-data-check",
        env={"DW_RUNS": str(tmp_path / "runs")},
    )
    assert p.returncode == 0, p.stderr
    assert "planned on the CPU" not in p.stderr


def test_depth_delusion_advises_the_small_block_first_and_a_holdout_fit(tmp_path):
    doc = _json(
        dw(
            "sweep",
            "depth_delusion",
            "launcher=slurm",
            "--dry-run",
            "--no-data-check",
            "--json",
            env={"DW_RUNS": str(tmp_path / "runs")},
        )
    )
    assert "--only small: 16 runs" in doc["advice"] and "dw fit depth_delusion --holdout largest:3" in doc["advice"]
    sc = doc["schedule"]  # 16 one-GPU runs and 14 eight-GPU runs, all at once (array_parallelism 64)
    assert (sc["at_once"], sc["nodes"], sc["gpus"], sc["full_nodes"]) == (30, 30, 16 + 14 * 8, 16)
    assert sc["calendar_hours"] == max(r["run_hours"] for r in doc["runs"])  # requeue restarts and waits too
    assert doc["requeues"] == sum(math.ceil(r["wall_hours"]) - 1 for r in doc["runs"])  # launcher.time 01:00:00
    assert not (tmp_path / "runs").exists()
    # a sweep without small and large runs gets no advice
    assert _json(dw("sweep", "tiny", "--dry-run", "--json", env=_sweep(tmp_path, steps=(300, 600))))["advice"] is None


def test_local_gpus_per_run_beyond_the_visible_gpus_is_refused_by_the_dry_run_too(tmp_path):
    env = {**_sweep(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    args = ["sweep", "tiny", "launcher=local", "launcher.gpus_per_run=2"]
    real = assert_bad_input(dw(*args, env=env))
    assert "launcher.gpus_per_run" in real and real == assert_bad_input(dw(*args, "--dry-run", env=env))
    assert not (tmp_path / "runs").exists()
