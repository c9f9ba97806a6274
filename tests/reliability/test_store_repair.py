"""A run store repairs what its checkpoints can re-create (issue 38, items 3 and 4).

A torn last line of metrics.jsonl and probes.jsonl (the step-30 records cut short, the step-30
checkpoint whole): the resume says so in one line per file and restores both records from the
checkpoint, which holds the lines logged since the one before; the files end equal to the
uninterrupted run's.  A done run whose summary.json is cut short: ``dw status`` names the file,
``dw fit`` calls it what it is, and ``dw sweep --retry-failed`` rewrites it from the run's newest
checkpoint without training a step again."""

from __future__ import annotations

import json
import shutil

from tests.helpers import run_dw
from tests.test_launch import tiny_env
from tests.test_train import TIMING

ARGS = [
    "model.depth=2",
    "model.width=64",
    "train.batch_size=8",
    "train.seq_len=64",
    "train.threads=1",
    "train.log_every=10",
    "probe.every=10",
    "train.steps=40",
    "train.ckpt_every=10",
    "train.keep_ckpts=0",
]


def _lines(path) -> list[dict]:
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING} for x in path.read_text().splitlines()]


def _lost_and_doubled(got: list[dict], want: list[dict]) -> tuple[int, int]:
    steps = [r["step"] for r in got]
    return sum(1 for r in want if r["step"] not in steps), len(steps) - len(set(steps))


def test_a_torn_last_line_is_restored_from_the_checkpoint(tmp_path, ledger):
    ref, d = tmp_path / "ref", tmp_path / "run"
    assert run_dw("train", "--quiet", *ARGS, f"run.dir={ref}").returncode == 0
    shutil.copytree(ref, d)  # the same run, as it was just after its step-30 checkpoint ...
    (d / "summary.json").write_text(json.dumps({**json.loads((ref / "summary.json").read_text()), "status": "running"}))
    shutil.rmtree(d / "ckpt" / "step_00000040")
    for name in ("metrics.jsonl", "probes.jsonl"):  # ... with the step-30 record of each file cut short
        rows = [json.loads(x) for x in (ref / name).read_text().splitlines() if json.loads(x)["step"] <= 30]
        assert rows[-1]["step"] == 30
        text = "".join(json.dumps(r) + "\n" for r in rows[:-1]) + json.dumps(rows[-1])[:25]
        (d / name).write_text(text)

    p = run_dw("train", "--quiet", *ARGS, f"run.dir={d}")
    assert p.returncode == 0, p.stderr
    said = [ln for ln in p.stderr.splitlines() if "torn line" in ln]
    assert len(said) == 2 and all("(step 30): restored 1 record(s) (step 30) from the checkpoint" in s for s in said)
    lost = dups = 0
    for name in ("metrics.jsonl", "probes.jsonl"):
        got, want = _lines(d / name), _lines(ref / name)
        a, b = _lost_and_doubled(got, want)
        lost, dups = lost + a, dups + b
    final = [json.loads((x / "summary.json").read_text())["final_val_loss"] for x in (ref, d)]
    ledger(faults=2, recovered=1, lost=lost, duplicates=dups)
    assert lost == 0 and dups == 0
    assert _lines(d / "metrics.jsonl") == _lines(ref / "metrics.jsonl")
    assert _lines(d / "probes.jsonl") == _lines(ref / "probes.jsonl")
    assert final[0] == final[1]


def test_a_done_run_with_a_truncated_summary_is_rewritten_by_retry_failed(tmp_path, ledger):
    env = tiny_env(tmp_path, steps=8)
    assert run_dw("sweep", "tiny", "launcher=debug", env=env).returncode == 0
    runs = tmp_path / "runs" / "tiny"
    rid = sorted(p.name for p in runs.iterdir() if (p / "summary.json").is_file())[0]
    f = runs / rid / "summary.json"
    before, metrics = json.loads(f.read_text()), _lines(runs / rid / "metrics.jsonl")
    f.write_text(f.read_text()[:100])  # cut short mid-string

    st = json.loads(run_dw("status", "tiny", "--json", env=env).stdout)
    (row,) = [r for r in st["runs"] if r["run_id"] == rid]
    assert row["state"] == "failed" and "summary.json unreadable (JSONDecodeError" in row["reason"]
    assert any(str(f) in p and "--retry-failed rewrites it" in p for p in st["problems"])
    fit = run_dw("fit", "tiny", "--law", "chinchilla", env=env)
    assert "1 whose summary.json is unreadable" in fit.stderr and "not started" not in fit.stderr, fit.stderr

    p = run_dw("sweep", "tiny", "launcher=debug", "--retry-failed", "--json", env=env)
    assert p.returncode == 0, p.stderr
    assert [s["run_id"] for s in json.loads(p.stdout)["submitted"]] == [rid]
    after = json.loads(f.read_text())
    got = _lines(runs / rid / "metrics.jsonl")
    lost, dups = _lost_and_doubled(got, metrics)
    ledger(faults=1, recovered=int(after["status"] == "done"), lost=lost, duplicates=dups)
    same = ("status", "steps", "tokens", "final_val_loss", "budgets", "params", "run_id")
    assert {k: after[k] for k in same} == {k: before[k] for k in same}
    assert got == metrics  # not a step trained again
    assert not (runs / rid / "failures.jsonl").exists()
    st = json.loads(run_dw("status", "tiny", "--json", env=env).stdout)
    assert st["counts"]["done"] == 2 and not st["problems"]
