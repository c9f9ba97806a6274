"""Data that suffices: ``dw train`` and ``dw sweep --dry-run`` say in one line when a run plans more
tokens than its train split holds (epochs, per run, with the count), and the dry run checks every run
against the prepared corpus and shows its size on disk.  A real corpus prepared by dw data prepare."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.helpers import dw, REPO

SWEEP = """
    groups: {model: depth_delusion, data: memmap}
    fixed: {model.depth: 1, model.width: 64, train.seq_len: 32, train.batch_size: 8, train.threads: 1,
            data.path: PATH, data.vocab_size: 257}
    axes:
      train.steps: [10, 100, 400]
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """CONTRACTS.md as a byte-level corpus: about 20k train tokens (val at least 10%)."""
    from depthwidth.data.prepare import prepare

    root = tmp_path_factory.mktemp("corpus")
    (root / "a.txt").write_text((REPO / "docs" / "CONTRACTS.md").read_text()[:24000])
    meta = prepare(str(root / "a.txt"), "byte", root / "data", val_fraction=0.1, val_min_tokens=0)
    n = sum(int(s["tokens"]) for s in meta["splits"]["train"]["shards"])
    return root / "data", n


def test_dw_train_warns_in_one_line_when_its_tokens_exceed_the_train_split(tmp_path, corpus):
    data, n = corpus
    steps = n // 256 + 5  # 256 tokens per step: a little over one epoch
    args = [
        "train",
        "--quiet",
        "model=depth_delusion",
        "model.depth=1",
        "model.width=64",
        "data=memmap",
        f"data.path={data}",
        "data.vocab_size=257",
        "train.seq_len=32",
        "train.batch_size=8",
        "train.threads=1",
        f"train.steps={steps}",
        f"run.dir={tmp_path / 'r'}",
    ]
    p = dw(*args)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "epochs" in ln]
    assert len(lines) == 1, p.stderr
    assert f"{steps * 256:,} training tokens, {steps * 256 / n:.2f} epochs of the {n:,}-token train split" in lines[0]
    assert lines[0].startswith("dw warning: the run plans") and str(data.resolve()) in lines[0]
    q = dw(*[a for a in args if not a.startswith("train.steps")], "train.steps=10", f"run.dir={tmp_path / 's'}")
    assert q.returncode == 0 and "epochs" not in q.stderr, q.stderr  # within the split: nothing said


def test_the_dry_run_checks_every_run_against_the_prepared_corpus(tmp_path, corpus):
    data, n = corpus
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "rep.yaml").write_text(textwrap.dedent(SWEEP).replace("PATH", str(data)))
    env = {"DW_SWEEPS": str(sweeps), "DW_RUNS": str(tmp_path / "runs")}
    p = dw("sweep", "rep", "--dry-run", env=env)
    assert p.returncode == 0, p.stderr
    disk = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("data: memmap"))
    assert f"{n:,} train + " in line and f"{disk / 2**20:,.1f} MiB on disk" in line
    over = [r for r in (10, 100, 400) if r * 256 > n]
    warn = [ln for ln in p.stderr.splitlines() if "epochs" in ln]
    assert len(warn) == 1 and warn[0].startswith(f"dw: warning: {len(over)} of 3 runs read their train split"), p.stderr
    assert f"{400 * 256:,} training tokens, {400 * 256 / n:.2f} epochs" in warn[0]
    doc = json.loads(dw("sweep", "rep", "--dry-run", "--json", env=env).stdout)
    assert [d["train_tokens"] for d in doc["data"]] == [n] and doc["data"][0]["disk_bytes"] == disk
    assert [r["epochs"] for r in doc["runs"]] == pytest.approx([s * 256 / n for s in (10, 100, 400)])
