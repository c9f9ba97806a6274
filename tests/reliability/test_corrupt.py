"""Corrupt artefacts in a sweep store: garbage and binary manifest lines, a truncated
manifest tail, an unreadable summary.json, a torn last metrics line.  ``dw status``
reads past them, lists every readable run and reports each problem; a corrupt newest
checkpoint (one flipped byte: a checksum mismatch) is skipped by the resume."""

from __future__ import annotations

import json

from tests.helpers import run_dw
from tests.test_status import _fake_sweep
from tests.test_train import TINY, _metrics


def test_status_reads_past_corruption_and_reports_it(tmp_path, monkeypatch, ledger):
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    _fake_sweep(tmp_path, "s", 4, states={1: "running", 2: "failed"})
    m = tmp_path / "s" / "manifest"
    good = m.read_bytes()
    m.write_bytes(good + b"\xff\xfe\x00 not json\n42\n" + good.splitlines(keepends=True)[-1][:30])
    (tmp_path / "s" / "run00002" / "summary.json").write_text('{"run_id": "run00002", "sta')
    with open(tmp_path / "s" / "run00001" / "metrics.jsonl", "a") as f:
        f.write('{"step": 8, "tok')
    p = run_dw("status", "s", "--json", env={"DW_RUNS": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    st = json.loads(p.stdout)
    assert [r["run_id"] for r in st["runs"]] == [f"run{i:05d}" for i in range(4)]
    probs = st["problems"]
    found = [
        any("manifest: 3 unreadable line(s)" in x for x in probs),
        any(x.startswith("run00002: summary.json unreadable") for x in probs),
        any(x.startswith("run00001: metrics.jsonl ends in a torn line") for x in probs),
    ]
    ledger(faults=5, recovered=0, lost=4 - len(st["runs"]), duplicates=0)
    assert all(found) and len(probs) == 3, probs
    text = run_dw("status", "s", env={"DW_RUNS": str(tmp_path)})
    assert text.returncode == 0 and text.stdout.count("problem:") == 3


def test_a_bad_checksum_in_the_newest_checkpoint_falls_back_to_the_one_before(tmp_path, ledger):
    d = tmp_path / "run"
    args = [*TINY, "train.steps=30", "train.ckpt_every=10", "train.keep_ckpts=3", f"run.dir={d}"]
    assert run_dw("train", *args).returncode == 0
    final, ref = json.loads((d / "summary.json").read_text())["final_val_loss"], _metrics(d)
    shard = d / "ckpt" / "step_00000030" / "__0_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one bit pattern off: only the checksum can tell
    shard.write_bytes(bytes(data))
    (d / "summary.json").unlink()
    p = run_dw("train", *args)
    assert p.returncode == 0, p.stderr
    flat = " ".join(p.stderr.split())  # rich wraps long lines
    assert "step_00000030 is corrupt (__0_0.distcp checksum mismatch)" in flat and "from step 20" in flat
    got = _metrics(d)
    steps = [r["step"] for r in got]
    ledger(faults=1, recovered=1, lost=len(ref) - len(got), duplicates=len(steps) - len(set(steps)))
    assert got == ref and json.loads((d / "summary.json").read_text())["final_val_loss"] == final
