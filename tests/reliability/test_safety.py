"""Safety: sweep names cannot leave the runs directory (``../``, absolute paths, a link
out of it), and neither file of a checkpoint that is a pickle can run code when it is
loaded: extra.pt (``weights_only``) and DCP's .metadata (an unpickler that knows only
DCP's index classes: train/checkpoint.py)."""

from __future__ import annotations

import hashlib
import os
import pickle

import pytest

from tests.helpers import assert_bad_input, run_dw
from tests.test_train import TINY


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "../x"],
        ["status", "/etc"],
        ["fit", "../x"],
        ["report", "../x"],
        ["sync", "../x"],
        ["status", "a/b"],
        ["status", ".hidden"],
        ["status", "link"],
    ],
)
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


@pytest.mark.parametrize("name", ["extra.pt", ".metadata"])
def test_a_tampered_checkpoint_runs_no_code(tmp_path, name):
    d = tmp_path / "run"
    args = [*TINY, "train.steps=10", "train.ckpt_every=5", "train.keep_ckpts=3", f"run.dir={d}"]
    assert run_dw("train", *args).returncode == 0
    (d / "summary.json").unlink()  # as if the run had died after its last checkpoint
    ck = d / "ckpt" / "step_00000010"
    marker = tmp_path / "pwned"
    os.environ["DW_MARKER"] = str(marker)
    try:
        (ck / name).write_bytes(pickle.dumps({"x": _Boom()}))
    finally:
        del os.environ["DW_MARKER"]
    # the attacker fixes the manifest too, so the checksum check alone would not stop it
    lines = [ln for ln in (ck / "MANIFEST").read_text().splitlines() if not ln.endswith(f"  {name}")]
    lines.append(f"{hashlib.sha256((ck / name).read_bytes()).hexdigest()}  {name}")
    (ck / "MANIFEST").write_text("\n".join(sorted(lines, key=lambda s: s.split("  ")[1])) + "\n")
    p = run_dw("train", *args, env={"DW_MARKER": str(marker)})
    assert not marker.exists()  # the payload never ran
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "dw: error: checkpoint" in p.stderr and "not plain data" in p.stderr


@pytest.mark.parametrize("umask, file_mode, dir_mode", [(0o022, 0o644, 0o755), (0o000, 0o664, 0o775)])
def test_a_run_directory_follows_the_umask_and_is_never_world_writable(tmp_path, umask, file_mode, dir_mode):
    import subprocess
    import sys

    from tests.helpers import REPO

    d = tmp_path / "run"
    code = (
        f"import os, sys; os.umask({umask}); from depthwidth.cli.app import main; "
        f"sys.argv = ['dw', 'train', *sys.argv[1:]]; main()"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, *TINY, "train.steps=10", "train.ckpt_every=5", f"run.dir={d}"],
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    paths = [d, *d.rglob("*")]
    assert any(q.is_file() and q.parent.name.startswith("step_") for q in paths)  # the checkpoint's own files too
    for q in paths:
        mode = q.stat().st_mode & 0o777
        assert not mode & 0o002, (q, oct(mode))  # no one else may write into a run store
        if q.is_dir():
            assert mode == dir_mode, (q, oct(mode))
        elif q.name in ("config.yaml", "summary.json", "metrics.jsonl"):
            assert mode == file_mode, (q, oct(mode))  # the user's umask, not mkstemp's 0600
