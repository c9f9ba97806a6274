"""Safety: sweep names cannot leave the runs directory (``../``, absolute paths, a link
out of it), and a checkpoint's extra.pt cannot run code when it is loaded
(``weights_only``; DCP's .metadata is a plain pickle: see train/checkpoint.py)."""

from __future__ import annotations

import hashlib
import os
import pickle

import pytest

from tests.helpers import assert_bad_input, run_dw
from tests.test_train import TINY


@pytest.mark.parametrize("argv", [
    ["status", "../x"], ["status", "/etc"], ["fit", "../x"], ["report", "../x"], ["sync", "../x"],
    ["status", "a/b"], ["status", ".hidden"], ["status", "link"],
])
def test_sweep_names_stay_inside_the_runs_directory(tmp_path, argv):
    runs, outside = tmp_path / "runs", tmp_path / "x"
    runs.mkdir()
    outside.mkdir()
    (outside / "manifest").write_text('{"event": "submit", "run_id": "r", "job_id": "local-1_0"}\n')
    os.symlink(outside, runs / "link")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    line = assert_bad_input(run_dw(*argv, env={"DW_RUNS": str(runs)}))
    assert "sweep" in line and ("one folder of the runs directory" in line or "not a link" in line)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


class _Boom:
    """Unpickling this runs code: what a tampered checkpoint would do."""
    def __reduce__(self):
        return (open, (os.environ["DW_MARKER"], "w"))


def test_a_tampered_checkpoint_runs_no_code(tmp_path):
    d = tmp_path / "run"
    args = [*TINY, "train.steps=10", "train.ckpt_every=5", "train.keep_ckpts=3", f"run.dir={d}"]
    assert run_dw("train", *args).returncode == 0
    (d / "summary.json").unlink()  # as if the run had died after its last checkpoint
    ck = d / "ckpt" / "step_00000010"
    marker = tmp_path / "pwned"
    os.environ["DW_MARKER"] = str(marker)
    try:
        (ck / "extra.pt").write_bytes(pickle.dumps({"x": _Boom()}))
    finally:
        del os.environ["DW_MARKER"]
    # the attacker fixes the manifest too, so the checksum check alone would not stop it
    lines = [ln for ln in (ck / "MANIFEST").read_text().splitlines() if not ln.endswith("  extra.pt")]
    lines.append(f"{hashlib.sha256((ck / 'extra.pt').read_bytes()).hexdigest()}  extra.pt")
    (ck / "MANIFEST").write_text("\n".join(sorted(lines, key=lambda s: s.split('  ')[1])) + "\n")
    p = run_dw("train", *args, env={"DW_MARKER": str(marker)})
    assert not marker.exists()  # weights_only=True: the payload never ran
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "dw: error: checkpoint" in p.stderr and "not plain data" in p.stderr
