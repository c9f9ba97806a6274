"""Bad input across every subcommand: each exits 2 with one line naming what is wrong,
no traceback, nothing written or submitted.  (Config settings have their own table in
tests/test_config_schema.py; these are the other kinds: shapes, data paths, sweep files,
fit tables, laws, filters, sources, names.)  In-process ``dw`` (cli.app.main) keeps the
table cheap; the one-line/exit-code contract is the same as a subprocess's."""

from __future__ import annotations

import pytest

from depthwidth.cli.app import main

GOOD_TABLE = "params,tokens,loss\n" + "".join(
    f"{n},{20 * n},{2 + 400 / n**0.3}\n" for n in (1e6, 2e6, 4e6, 8e6, 16e6, 32e6, 64e6, 128e6)
)
TABLES = {
    "good.csv": GOOD_TABLE,
    "nan.csv": "params,tokens,loss\n" + "".join(f"{n},{20 * n},nan\n" for n in (1e6, 2e6, 4e6, 8e6, 16e6, 32e6)),
    "negative.csv": "params,tokens,loss\n" + "".join(f"{n},{20 * n},-1\n" for n in (1e6, 2e6, 4e6, 8e6, 16e6, 32e6)),
    "few.csv": "params,tokens,loss\n1e6,2e7,3.1\n2e6,4e7,3.0\n",
    "nocolumn.csv": "params,loss\n1e6,3.1\n2e6,3.0\n4e6,2.9\n8e6,2.8\n16e6,2.7\n32e6,2.6\n",
    "notcsv.csv": "\x00\x01 this is not a table",
}
SWEEPS = {  # sweep files with one mistake each
    "unknown_key.yaml": "groups: {model: vwt, data: pydoc}\nfixed: {model.width: 64}\naxes: {model.depth: "
    "[2]}\nbogus: 1\n",
    "axis_bad_range.yaml": "groups: {model: vwt, data: pydoc}\naxes: {model.depth: {start: 4, stop: 1}}\n",
    "bad_value.yaml": "groups: {model: vwt, data: pydoc}\nfixed: {optim.lr: -1}\naxes: {model.depth: [2]}\n",
    "bad_group.yaml": "groups: {model: nosuch, data: pydoc}\naxes: {model.depth: [2]}\n",
    "not_yaml.yaml": "groups: [unclosed\n",
    "bad_width.yaml": "groups: {model: vwt, data: pydoc}\nfixed: {model.width: 63}\naxes: {model.depth: [2]}\n",
}

CASES = [
    # dw train: shapes, data, keys
    ("train", "model.depth=0"),
    ("train", "model.width=63"),
    ("train", "model.shape=zigzag"),
    ("train", "data=nosuch"),
    ("train", "data=memmap", "data.path=/nonexistent/tokens"),
    ("train", "nosuchgroup.key=1"),
    ("train", "model.depth=2", "model.width=64", "train.budgets=abc"),
    # dw sweep: names, files, options
    ("sweep", "nosuch", "--dry-run"),
    ("sweep", "../demo", "--dry-run"),
    ("sweep", "demo", "--mfu", "0", "--dry-run"),
    ("sweep", "demo", "--peak", "-1", "--dry-run"),
    ("sweep", "demo", "launcher=nosuch", "--dry-run"),
    ("sweep", "demo", "--only", "model.depth=999", "--dry-run"),
    *[("sweep", name[:-5], "--dry-run") for name in SWEEPS],
    # dw status
    ("status", "nosuch"),
    ("status", "../x"),
    ("status", "/etc"),
    ("status", "demo", "--watch", "--interval", "0"),
    ("status", "demo", "--watch", "--json"),
    ("status", "demo", "--backtest", "1.5"),
    # dw fit: tables, laws, filters, options, sources
    ("fit",),
    ("fit", "--runs", "missing.csv"),
    ("fit", "--runs", "notcsv.csv"),
    ("fit", "--runs", "nan.csv"),
    ("fit", "--runs", "good.csv", "--columns", "loss=nosuch"),
    ("fit", "--runs", "negative.csv"),
    ("fit", "--runs", "few.csv"),
    ("fit", "--runs", "nocolumn.csv"),
    ("fit", "--runs", "good.csv", "--law", "nosuch"),
    ("fit", "--runs", "good.csv", "--bootstrap", "-1"),
    ("fit", "--runs", "good.csv", "--ci", "1.5"),
    ("fit", "--runs", "good.csv", "--huber-delta", "0"),
    ("fit", "--runs", "good.csv", "--compare", "nosuch"),
    ("fit", "--runs", "good.csv", "--where", "nocolumn=1"),
    ("fit", "--runs", "good.csv", "--where", "garbage"),
    ("fit", "--runs", "good.csv", "--where", "params=-5"),
    ("fit", "--runs", "good.csv", "--pin", "nosuch=1"),
    ("fit", "--runs", "good.csv", "--dcrit", "cubic"),
    ("fit", "--runs", "good.csv", "--max-starts", "0"),
    ("fit", "--runs", "good.csv", "--n-convention", "embedding"),
    ("fit", "--runs", "good.csv", "--n-convention", "non-embedding"),  # good.csv has no params_non_embedding
    ("fit", "--runs", "good.csv", "--resample", "rows"),
    ("fit", "--runs", "good.csv", "--c-ref", "-1"),
    # dw simulate
    ("simulate", "demo", "--law", "nosuch"),
    ("simulate", "demo", "--set", "kappa=0"),
    ("simulate", "demo", "--name", "demo"),
    ("fit", "--source", "nosuch", "--runs", "good.csv"),
    ("fit", "--source", "wandb"),
    ("fit", "--source", "wandb", "--project", "me/proj/x"),
    ("fit", "--source", "wandb", "--project", "me/what?"),
    ("sweep", "demo", "tracker=wandb", "tracker.project=a/b"),
    ("sweep", "demo", "tracker=wandb", "tracker.entity=me:you"),
    ("fit", "../x"),
    # dw report
    ("report", "nosuch"),
    ("report", "--runs", "missing.csv"),
    ("report", "--runs", "good.csv", "--fit", "missing.json"),
    ("report", "--runs", "good.csv", "--format", "pdf"),
    # dw shapes, data, sync, unknown command
    ("shapes", "x", "-w", "64", "-d", "0"),
    ("shapes", "zigzag", "-w", "64", "-d", "4"),
    ("shapes", "x", "-w", "64", "-d", "4", "--ratio", "-1"),
    ("shapes", "x", "-w", "64", "-d", "4", "--preset", "nosuch"),
    ("data", "prepare", "--source", "/nonexistent/x.txt", "--tokenizer", "byte", "--out", "out"),
    ("data", "prepare", "--source", "pydoc", "--tokenizer", "nosuch", "--out", "out"),
    ("sync", "nosuch"),
    ("nosuchcommand",),
]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    for name, text in TABLES.items():
        (tmp_path / name).write_text(text)
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    for name, text in SWEEPS.items():
        (sweeps / name).write_text(text)
    from tests.helpers import REPO

    (sweeps / "demo.yaml").write_text((REPO / "sweeps" / "demo.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("DW_SWEEPS", str(sweeps))
    return tmp_path


def _snapshot(d):
    return sorted((str(p.relative_to(d)), p.stat().st_size) for p in d.rglob("*") if "__pycache__" not in p.parts)


def test_the_table_has_forty_distinct_cases():
    assert len(CASES) >= 40 and len(set(CASES)) == len(CASES)
    assert {c[0] for c in CASES} >= {"train", "sweep", "status", "fit", "report", "shapes", "data", "sync"}


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c) for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(argv, workdir, capsys):
    before = _snapshot(workdir)
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert e.value.code == 2, (e.value.code, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("dw: error: "), err
    assert "Traceback" not in err + out
    assert _snapshot(workdir) == before  # nothing written
