"""Provenance in every result (config.yaml, summary.json, W&B config — see
test_tracking — and fit.json), a dirty tree flagged, and the precision part of
a run's identity while the device is not."""

from __future__ import annotations

import json
import subprocess

import pytest

from depthwidth.config.compose import compose
from depthwidth.config.identity import run_id
from depthwidth.core import provenance
from tests.helpers import dw, REPO
from tests.planted import PLANTED, planted_table

TINY = [
    "model.depth=2",
    "model.width=64",
    "train.batch_size=4",
    "train.seq_len=32",
    "train.threads=1",
    "train.log_every=5",
    "probe.every=0",
    "train.steps=5",
]
KEYS = ("dw", "git", "versions", "device", "precision", "data", "job_id")


def _head() -> str | None:
    p = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def test_a_run_records_its_provenance_in_config_and_summary(tmp_path):
    from omegaconf import OmegaConf

    d = tmp_path / "run"
    p = dw("train", *TINY, f"run.dir={d}", env={"DW_JOB_ID": "local-test_0"})
    assert p.returncode == 0, p.stderr
    cfg = OmegaConf.to_container(OmegaConf.load(d / "config.yaml"))
    summ = json.loads((d / "summary.json").read_text())
    for prov in (cfg["provenance"], summ["provenance"]):
        assert set(KEYS) <= set(prov)
        assert prov["git"]["commit"] == _head() and isinstance(prov["git"]["dirty"], (bool, type(None)))
        assert set(prov["versions"]) == {"python", "torch", "numpy", "scipy"}
        assert prov["versions"]["torch"].startswith("2.13.0")
        assert (prov["device"], prov["precision"]) == ("cpu", "fp32")
        assert prov["job_id"] == "local-test_0"
        assert len(prov["data"]) == 16
    assert cfg["train"]["precision"] == "fp32" and summ["precision"] == "fp32"


def test_the_data_fingerprint_follows_the_data():
    from depthwidth.data.source import make_source

    a = make_source({"name": "synthetic", "vocab_size": 64, "order": 2, "alpha": 0.1, "seed": 0}, 32)
    b = make_source({"name": "synthetic", "vocab_size": 64, "order": 2, "alpha": 0.1, "seed": 1}, 32)
    a2 = make_source({"name": "synthetic", "vocab_size": 64, "order": 2, "alpha": 0.1, "seed": 0}, 32)
    assert a.fingerprint == a2.fingerprint != b.fingerprint


def test_a_dirty_tree_is_flagged(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    (repo / "f.py").write_text("x = 1\n")
    subprocess.run(git + ["add", "f.py"], check=True)
    subprocess.run(git + ["commit", "-qm", "one"], check=True)
    provenance.git_state.cache_clear()
    clean = provenance.git_state(str(repo))
    assert clean["commit"] and len(clean["commit"]) == 40 and clean["dirty"] is False
    # the README's workflow: one's own sweep file and data, untracked -- not a change to the code
    (repo / "sweeps").mkdir()
    (repo / "sweeps" / "mydocs.yaml").write_text("groups: {}\n")
    (repo / "data" / "mydocs").mkdir(parents=True)
    (repo / "data" / "mydocs" / "meta.json").write_text("{}")
    provenance.git_state.cache_clear()
    assert provenance.git_state(str(repo))["dirty"] is False  # before: True for every run
    (repo / "depthwidth").mkdir()
    (repo / "depthwidth" / "new.py").write_text("y = 1\n")  # untracked code is a change
    provenance.git_state.cache_clear()
    assert provenance.git_state(str(repo))["dirty"] is True
    (repo / "depthwidth" / "new.py").unlink()
    (repo / "f.py").write_text("x = 2\n")
    provenance.git_state.cache_clear()
    assert provenance.git_state(str(repo))["dirty"] is True
    provenance.git_state.cache_clear()
    assert provenance.git_state(str(tmp_path / "nowhere"))["commit"] is None


def test_mixed_commits_and_precisions_are_warned_about():
    a = {"git": {"commit": "a" * 40, "dirty": False}, "precision": "fp32"}
    b = {"git": {"commit": "b" * 40, "dirty": True}, "precision": "bf16"}
    w = provenance.mixed([a, a, b])
    assert any("2 different commits" in x for x in w)
    assert any("1 of 3 runs" in x and "dirty" in x for x in w)
    assert any("2 precisions" in x for x in w)
    assert provenance.mixed([a, a]) == []


def test_precision_is_part_of_the_run_id_and_the_device_is_not():
    base = compose(["train.precision=fp32"])
    assert run_id(base) != run_id(compose(["train.precision=bf16"]))
    assert run_id(base) == run_id(compose(["train.precision=fp32", "train.device=cuda"]))
    with pytest.raises(ValueError):
        run_id(compose([]))  # precision=auto must be resolved first


def test_a_sweep_pins_the_precision_of_its_launchers_device():
    cpu = json.loads(dw("sweep", "demo", "--dry-run", "--json").stdout)
    gpu = json.loads(dw("sweep", "demo", "launcher=slurm", "launcher.gpus_per_node=1", "--dry-run", "--json").stdout)
    assert (cpu["device"], gpu["device"]) == ("cpu", "cuda")
    assert all("train.precision=fp32" in r["overrides"] for r in cpu["runs"])
    assert all("train.precision=bf16" in r["overrides"] for r in gpu["runs"])
    assert not {r["run_id"] for r in cpu["runs"]} & {r["run_id"] for r in gpu["runs"]}
    pinned = json.loads(
        dw(
            "sweep", "demo", "launcher=slurm", "launcher.gpus_per_node=1", "train.device=cpu", "--dry-run", "--json"
        ).stdout
    )
    assert all("train.precision=fp32" in r["overrides"] for r in pinned["runs"])  # train.device wins over the launcher
    same = json.loads(dw("sweep", "demo", "launcher=local", "launcher.gpus=none", "--dry-run", "--json").stdout)
    assert [r["run_id"] for r in same["runs"]] == [r["run_id"] for r in cpu["runs"]]  # another CPU launcher: same runs


def test_fit_json_records_provenance_and_the_input_tables_fingerprint(tmp_path):
    from depthwidth.fit import fit
    from depthwidth.fit.files import table_fingerprint

    from depthwidth.fit.laws import get_law

    df = planted_table(get_law("chinchilla"), PLANTED["chinchilla"], noise=0.0, seed=0)
    out = tmp_path / "fit.json"
    res = fit(runs=df, law="chinchilla", bootstrap=0, max_starts=200, out=out)
    doc = json.loads(out.read_text())
    assert doc["provenance"] == res["provenance"]
    assert set(KEYS) <= set(doc["provenance"])
    assert doc["provenance"]["git"]["commit"] == _head()
    assert doc["provenance"]["data"] == table_fingerprint(df)
    df2 = df.copy()
    df2.loc[0, "loss"] += 0.01
    assert table_fingerprint(df2) != table_fingerprint(df)
