"""Sweep files -> runs: expansion, composition, dry-run, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from depthwidth.sweep import expand as sweep
from depthwidth.config.compose import compose
from depthwidth.config.overrides import fmt_value
from depthwidth.config.identity import run_id
from depthwidth.core.errors import BadInput
from tests.helpers import assert_bad_input, dw, REPO
from tests.hydra_oracle import hydra_compose

SHIPPED = ("demo", "depth_delusion", "vwt_shapes")


def _plain(cfg):
    from depthwidth.config.node import plain

    return plain(cfg)


def write_sweep(tmp_path, name, text):
    d = tmp_path / "sweeps"
    d.mkdir(exist_ok=True)
    (d / f"{name}.yaml").write_text(textwrap.dedent(text))
    return d


# ---- the shipped sweeps ----------------------------------------------------------


@pytest.mark.parametrize("name", SHIPPED)
def test_sweep_composition_equals_dw_train_and_hydra_for_every_run(name):
    sw = sweep.expand(name)
    assert sw.runs and not sw.bad
    for r in sw.runs:
        full = compose(r.overrides)  # what dw train OVERRIDES trains
        assert dict(r.cfg) == _plain(full), r.overrides
        assert r.run_id == run_id(full)
        assert _plain(full) == hydra_compose(r.overrides), r.overrides  # the oracle


@pytest.mark.parametrize("name", SHIPPED)
def test_sweep_files_do_not_repeat_conf(name):
    """A fixed key whose value equals conf/'s own default is repetition."""
    doc = sweep.load_file(name)
    for blk in [doc] + list(doc.get("blocks") or []):
        groups = {**(doc.get("groups") or {}), **(blk.get("groups") or {})}
        base = _plain(compose([f"{g}={o}" for g, o in groups.items()]))
        for key, value in (blk.get("fixed") or {}).items():
            node = base
            for part in key.split("."):
                node = node[part]
            assert node != value, f"{name}: {key}={value} repeats conf/"


def test_depth_delusion_has_30_runs_with_every_published_config():
    sw = sweep.expand("depth_delusion")
    runs = sw.runs
    assert len(runs) == 30 and sw.duplicates == 0
    f = [r.figures for r in runs]
    assert min(x["depth"] for x in f) == 2 and max(x["depth"] for x in f) == 80
    assert min(x["width"] for x in f) == 256 and max(x["width"] for x in f) == 6144
    params = sorted(x["params"] for x in f)
    assert round(params[0] / 1e6) == 27 and round(params[-1] / 1e8) == 71  # 27M .. 7.1B
    published = {
        (16, 256): 3.929,
        (2, 512): 3.945,
        (8, 512): 3.543,
        (16, 512): 3.435,
        (24, 512): 3.468,
        (32, 512): 3.441,
        (16, 1536): 3.049,
        (24, 1792): 2.821,
        (80, 1024): 2.978,
        (40, 2432): 2.519,
        (72, 1792): 2.681,
        (32, 4096): 2.298,
        (64, 2816): 2.417,
    }
    by_shape = {(x["depth"], x["width"]): r for x, r in zip(f, runs)}
    for key, loss in published.items():
        assert by_shape[key].ref == {**by_shape[key].ref, "source": "published", "loss": loss}, key
    others = [r for r in runs if (r.figures["depth"], r.figures["width"]) not in published]
    assert len(others) == 17 and all(r.ref["source"] == "reconstructed" for r in others)
    for r in runs:  # the paper's data, shape and recipe; budgets 6.4B small, <= 140B for 1B-7B
        c = r.cfg
        assert (c.data.name, c.data.vocab_size, c.train.seq_len, c.train.batch_size) == ("memmap", 50257, 1024, 256)
        assert (c.optim.lr, c.run.seed, c.model.preset) == (3e-4, 42, "depth_delusion")
        if r.figures["params"] < 1e9:
            assert c.train.tokens == 6_400_000_000
        else:
            assert 2e10 <= c.train.tokens <= 1.4e11
    assert max(r.cfg.train.tokens for r in runs) == 140_000_000_000
    # the published 7B pair: parameter counts agree with the paper to 1%
    assert by_shape[(32, 4096)].figures["params"] == pytest.approx(6.86e9, rel=0.01)
    assert by_shape[(64, 2816)].figures["params"] == pytest.approx(6.38e9, rel=0.01)


def test_vwt_shapes_are_parameter_matched_with_the_resize_ablation():
    sw = sweep.expand("vwt_shapes")
    shapes = {(r.cfg.model.shape, r.cfg.model.resize) for r in sw.runs}
    assert {
        ("uniform", "carry"),
        ("increasing", "carry"),
        ("decreasing", "carry"),
        ("diamond", "carry"),
        ("x", "carry"),
        ("x", "zero"),
        ("x", "proj"),
    } == shapes
    assert len(sw.runs) == 7 and sw.duplicates == 1  # x/carry is in both blocks: one run
    base = [r for r in sw.runs if r.cfg.model.shape == "uniform"][0]
    assert (base.figures["width"], base.figures["depth"]) == (960, 24)
    for r in sw.runs:
        if r.cfg.model.resize != "proj":  # a projection adds its own weights
            assert r.figures["params"] == pytest.approx(base.figures["params"], rel=0.03)
    refs = {r.cfg.model.resize: r.ref["loss"] for r in sw.runs if r.cfg.model.shape == "x"}
    assert refs == {"carry": 3.099, "zero": 3.124, "proj": 3.150}


def test_demo_is_a_cpu_grid_with_the_four_shapes():
    sw = sweep.expand("demo")
    grid = {(r.figures["width"], r.figures["depth"]) for r in sw.runs if r.figures["shape"] == "uniform"}
    assert len({w for w, _ in grid}) >= 3 and len({d for _, d in grid}) >= 4
    assert {r.figures["shape"] for r in sw.runs} >= {"increasing", "decreasing", "diamond", "x"}
    for r in sw.runs:
        assert r.cfg.data.name == "pydoc" and r.cfg.train.threads == 1
        assert r.figures["params"] < 2e6


# ---- syntax --------------------------------------------------------------------------


def test_axes_ranges_zip_seeds_tokens(tmp_path, monkeypatch):
    d = write_sweep(
        tmp_path,
        "s",
        """
        groups: {model: vwt, data: synthetic}
        fixed: {model.heads: 4, model.shape: uniform, train.seq_len: 32, train.batch_size: 4}
        axes:
          model.depth: {start: 1, stop: 3}
        zip:
          - {model.width: [32, 64], optim.lr: [1.0e-3, 5.0e-4]}
        seeds: [1, 2]
        tokens: {per_param: 2}
    """,
    )
    monkeypatch.setenv("DW_SWEEPS", str(d))
    sw = sweep.expand("s")
    assert len(sw.runs) == 3 * 2 * 2
    combos = {(r.cfg.model.depth, r.cfg.model.width, r.cfg.optim.lr, r.cfg.run.seed) for r in sw.runs}
    assert (2, 64, 5e-4, 2) in combos and (2, 64, 1e-3, 2) not in combos
    for r in sw.runs:
        assert r.cfg.train.tokens == round(2 * r.figures["params"])
        assert r.overrides[:2] == ["model=vwt", "data=synthetic"]
    assert len({r.run_id for r in sw.runs}) == 12
    # seeds vary: W&B names carry -s{seed}; the flag is not part of the run id
    assert all(r.cfg.tracker.seed_in_name is True for r in sw.runs)
    import copy

    from depthwidth.config.identity import run_id

    r0 = sw.runs[0]
    c = copy.deepcopy(dict(r0.cfg))
    c["tracker"] = {**c["tracker"], "seed_in_name": False}
    assert run_id(c) == r0.run_id


def test_cli_overrides_apply_to_every_run_and_win(tmp_path, monkeypatch):
    sw = sweep.expand("demo", ["train.steps=7", "data=synthetic", "model.vocab_size=64"])
    assert all(r.cfg.train.steps == 7 and r.cfg.data.name == "synthetic" for r in sw.runs)
    assert all("train.steps=7" in r.overrides for r in sw.runs)


@pytest.mark.parametrize("value", [1, 2.5, 6.4e9, 3e-4, True, None, "x", "a b", "3", [1, 2], "null", "it's"])
def test_override_values_round_trip_through_hydra(value):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    o = OverridesParser.create().parse_overrides([f"k.v={fmt_value(value)}"])[0]
    assert o.value() == value and type(o.value()) is type(value)


def test_only_selects_by_glob():
    sw = sweep.expand("demo")
    assert len(sweep.select(sw.runs, "model.width=64")) == 4
    assert len(sweep.select(sw.runs, "model.shape=x")) == 1
    with pytest.raises(BadInput):
        sweep.select(sw.runs, "model.width=12345")


# ---- the CLI -------------------------------------------------------------------------


def _loaded_modules(argv):
    code = (
        "import sys\nfrom depthwidth.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print('MODS', ','.join(m for m in ('torch', 'hydra', 'pandas') if m in sys.modules))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    return p.stdout.split("MODS")[-1].strip(), p.stdout


def test_dry_run_json_lists_each_runs_exact_overrides_without_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    mods, out = _loaded_modules(["sweep", "depth_delusion", "--dry-run", "--no-data-check", "--json"])
    assert "torch" not in mods.split(",")
    doc = json.loads(out.split("MODS")[0])
    assert len(doc["runs"]) == 30 and doc["mfu"] == 0.4
    r = doc["runs"][6]
    assert (r["depth"], r["width"], r["ref"]["loss"]) == (16, 512, 3.435)
    cuda = r["plan"]["device"] == "cuda"  # launcher=debug: a GPU here, or the CPU (CPU-hours, at --cpu-peak)
    want = (r["flops_planned"] + r["flops_eval"]) / (0.4 * (989e12 if cuda else 1e11)) / 3600  # evaluations too
    assert r["device_hours"] == pytest.approx(want)
    assert r["gpu_hours" if cuda else "cpu_hours"] == r["device_hours"] and r["cpu_hours" if cuda else "gpu_hours"] == 0
    assert f"run.dir={tmp_path / 'runs' / 'depth_delusion' / r['run_id']}" in r["overrides"]
    # the override list reproduces the run by hand (`dw train OVERRIDES`)
    assert run_id(compose(r["overrides"])) == r["run_id"]
    assert not (tmp_path / "runs").exists()


def test_dry_run_table(tmp_path):
    p = dw("sweep", "vwt_shapes", "launcher=slurm", "--dry-run", "--no-data-check", env={"DW_RUNS": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    for word in ("uniform", "increasing", "decreasing", "diamond", "GPU-hours", "3.099", "published"):
        assert word in p.stdout
    assert not any(tmp_path.iterdir())


def test_unknown_sweep_lists_the_available_ones(tmp_path):
    line = assert_bad_input(dw("sweep", "nope", "--dry-run", env={"DW_RUNS": str(tmp_path)}))
    assert "nope" in line and "demo" in line and "depth_delusion" in line


def test_a_bad_axis_value_reports_every_bad_run_and_submits_none(tmp_path):
    d = write_sweep(
        tmp_path,
        "bad",
        """
        groups: {model: vwt, data: pydoc}
        fixed: {model.heads: 4, model.shape: uniform, train.steps: 2, train.seq_len: 32}
        axes:
          model.width: [32, 30, 64, 6]
    """,
    )
    p = dw("sweep", "bad", env={"DW_SWEEPS": str(d), "DW_RUNS": str(tmp_path / "runs")})
    line = assert_bad_input(p)
    assert "2 of 4 runs are invalid" in line and "model.width=30" in line and "model.width=6" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "args, words",
    [
        (["launcher.nonsense=1"], ["launcher.nonsense", "allowed"]),
        (["launcher=local", "launcher.partition=gpu"], ["launcher.partition", "launcher.workers"]),
        (["launcher=kubernetes"], ["kubernetes", "debug|local|slurm"]),
        (["pack=0"], ["pack", ">= 1"]),
        (["model.nonsense=1"], ["model.nonsense"]),
    ],
)
def test_bad_launcher_and_keys_are_bad_input(tmp_path, args, words):
    line = assert_bad_input(dw("sweep", "demo", *args, env={"DW_RUNS": str(tmp_path / "r")}))
    for w in words:
        assert w in line
    assert not (tmp_path / "r").exists()


def test_slurm_without_sbatch_is_bad_input(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    line = assert_bad_input(
        dw("sweep", "demo", "launcher=slurm", env={"PATH": str(empty), "DW_RUNS": str(tmp_path / "r")})
    )
    assert "sbatch" in line
    assert not (tmp_path / "r").exists()
    # planning needs no scheduler
    p = dw("sweep", "demo", "launcher=slurm", "--dry-run", env={"PATH": str(empty), "DW_RUNS": str(tmp_path / "r")})
    assert p.returncode == 0, p.stderr


def test_missing_data_is_reported_before_submitting(tmp_path):
    p = dw("sweep", "depth_delusion", "--only", "model.width=256", env={"DW_RUNS": str(tmp_path / "r")}, cwd=tmp_path)
    line = assert_bad_input(p)
    assert "4 of 4 runs are invalid" in line and "data/slimpajama" in line
    assert not (tmp_path / "r").exists()


def test_sweep_file_errors_are_bad_input(tmp_path, monkeypatch):
    d = write_sweep(tmp_path, "typo", "axis: {model.depth: [1]}\n")
    monkeypatch.setenv("DW_SWEEPS", str(d))
    with pytest.raises(BadInput, match="unknown key 'axis'"):
        sweep.expand("typo")
    write_sweep(tmp_path, "zip", "zip: [{model.depth: [1, 2], model.width: [32]}]\n")
    with pytest.raises(BadInput, match="different lengths"):
        sweep.expand("zip")
    write_sweep(tmp_path, "dir", "runs: [{run.dir: /tmp/x}]\n")
    with pytest.raises(BadInput, match="run.dir"):
        sweep.expand("dir")


def test_a_block_of_one_empty_run_is_one_run_and_an_empty_block_is_refused(tmp_path, monkeypatch):
    from depthwidth.core.errors import BadInput
    from depthwidth.sweep.file import load_file, points

    (tmp_path / "one.yaml").write_text("blocks:\n  - label: base\n    fixed: {model.width: 64}\n    runs: [{}]\n")
    (tmp_path / "none.yaml").write_text("blocks:\n  - label: base\n    fixed: {model.width: 64}\n")
    monkeypatch.setenv("DW_SWEEPS", str(tmp_path))
    assert len(points("one", load_file("one"))) == 1  # before: "block 1 has no runs, axes, zip or seeds"
    with pytest.raises(BadInput, match="block 1 has no runs, axes, zip or seeds"):
        points("none", load_file("none"))
