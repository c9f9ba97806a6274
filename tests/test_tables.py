"""The run tables: a run whose folder is gone is ``lost`` with its reason (not ``failed``, reason
null), and the dry-run and status tables show the seed and each tuned value where a sweep varies
them (else two runs of one configuration differ only in their run id).  A real sweep (launcher=local)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import dw, run_dw, sweep_store

SWEEP = """
    groups: {model: depth_delusion, data: pydoc}
    fixed: {model.depth: 1, model.width: 64, train.seq_len: 16, train.batch_size: 4, train.steps: 3,
            train.threads: 1, probe.every: 0, probe.at: []}
    seeds: [1, 2]
    tune:
      optim.lr: [1.0e-3, 1.0e-2]
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    env = sweep_store(root, "tab", SWEEP)
    p = run_dw("sweep", "tab", "launcher=local", "launcher.workers=2", env=env)
    assert p.returncode == 0, p.stderr
    w = dw("status", "tab", "--watch", "--interval", "0.5", "--timeout", "240", env=env)
    assert w.returncode == 0, w.stderr
    return root, env


def _header(text: str) -> list[str]:
    line = next(ln for ln in text.splitlines() if "run id" in ln)
    return [c.strip() for c in line.replace("┃", "|").split("|") if c.strip()]


def test_the_dry_run_shows_seed_and_tuned_value_columns(trained):
    root, env = trained
    p = dw("sweep", "tab", "--dry-run", env=env)  # piped: no column squeezed (the predictions made it wide)
    assert p.returncode == 0, p.stderr
    cols = _header(p.stdout)
    assert cols[cols.index("shape") + 1 : cols.index("shape") + 3] == ["seed", "optim.lr"]
    body = [ln for ln in p.stdout.splitlines() if ln.startswith("│")]
    cells = [[c.strip() for c in ln.split("│")[1:-1]] for ln in body]
    i = cols.index("seed")
    assert sorted((c[i], c[i + 1]) for c in cells) == [("1", "0.001"), ("1", "0.01"), ("2", "0.001"), ("2", "0.01")]
    one = dw("sweep", "tab", "--dry-run", "--only", "run.seed=1", "optim.lr=0.001", env=env)
    assert "seed" not in _header(one.stdout) and "optim.lr" not in _header(one.stdout)  # nothing varies


def test_status_shows_them_and_a_missing_run_directory_is_lost_with_its_reason(trained):
    root, env = trained
    st = json.loads(dw("status", "tab", "--json", env=env).stdout)
    assert [r["state"] for r in st["runs"]] == ["done"] * 4
    assert sorted((r["seed"], r["tuned"]["optim.lr"]) for r in st["runs"]) == [
        (1, 0.001),
        (1, 0.01),
        (2, 0.001),
        (2, 0.01),
    ]
    p = dw("status", "tab", env=env)
    cols = _header(p.stdout)
    assert {"seed", "optim.lr"} <= set(cols), p.stdout
    gone = st["runs"][1]
    shutil.rmtree(gone["run_dir"])
    st = json.loads(dw("status", "tab", "--json", env=env).stdout)
    row = next(r for r in st["runs"] if r["run_id"] == gone["run_id"])
    assert row["state"] == "lost" and "does not exist" in row["reason"] and gone["run_dir"] in row["reason"]
    assert st["counts"]["lost"] == 1 and st["counts"]["failed"] == 0
