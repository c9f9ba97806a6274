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
    "random.csv": "\x9f\x88 garbage \x00 , ,\n\x01",
    "empty.csv": "",
    "list.json": "[1, 2]\n",
    "table.xlsx": "params,tokens,loss\n",
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

G = "groups: {model: vwt, data: pydoc}\n"
SWEEPS.update(
    {  # hostile sweep files (issue 38): each refused in one line before anything is expanded
        "range_1e9.yaml": G + "axes: {model.depth: {start: 1, stop: 1000000000, step: 1}}\n",
        "range_tiny_step.yaml": G + "axes: {optim.lr: {start: 0.0, stop: 1.0e+300, step: 1.0e-300}}\n",
        "product_cap.yaml": G
        + "axes: {model.depth: {start: 1, stop: 400}, model.width: {start: 64, stop: 25600, step: 64}}\n",
        "seeds_1e7.yaml": G + "axes: {model.depth: [2]}\nseeds: {start: 1, stop: 10000000}\n",
        "tune_1e6.yaml": G + "axes: {model.depth: [2]}\ntune: {optim.lr: {log: [1.0e-5, 1.0e-1], n: 1000000}}\n",
        "blocks_cap.yaml": G
        + "blocks:\n"
        + "".join("  - axes: {model.depth: {start: 1, stop: 60000}}\n" for _ in range(2)),
        "laughs.yaml": 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
        + G
        + "axes: {model.depth: *i}\n",
        "alias_loop.yaml": "a: &a [1, *a]\n" + G + "axes: {model.depth: [2]}\n",
        "runs_int.yaml": G + "runs: 5\n",
        "runs_str.yaml": G + "runs: abc\n",
        "axes_list.yaml": G + "axes: [1, 2]\n",
        "zip_int.yaml": G + "zip: 5\n",
        "top_int.yaml": "42\n",
        "top_list.yaml": "[1, 2]\n",
        "top_str.yaml": "hello\n",
        "blocks_int.yaml": G + "blocks: 5\n",
        "block_str.yaml": G + "blocks: [x]\n",
        "width_true.yaml": G + "axes: {model.width: [true], model.depth: [2]}\n",
        "width_1e11.yaml": G + "fixed: {model.width: 99999999999}\naxes: {model.depth: [2]}\n",
        "depth_1e9.yaml": G + "fixed: {model.width: 64}\naxes: {model.depth: [1000000000]}\n",
        "heads_1e7.yaml": G + "fixed: {model.width: 64, model.heads: 10000000}\naxes: {model.depth: [2]}\n",
        "width_str.yaml": G + "fixed: {model.width: wide}\naxes: {model.depth: [2]}\n",
        "range_str.yaml": G + "axes: {model.depth: {start: a, stop: b}}\n",
        "range_step0.yaml": G + "axes: {model.depth: {start: 1, stop: 5, step: 0}}\n",
        "range_nan.yaml": G + "axes: {model.depth: {start: .nan, stop: 5}}\n",
        "range_bool.yaml": G + "axes: {model.depth: {start: true, stop: 5}}\n",
        "axis_empty.yaml": G + "axes: {model.depth: []}\n",
        "block_key.yaml": G + "blocks: [{axes: {model.depth: [2]}, bogus: 1}]\n",
        "tune_one.yaml": G + "axes: {model.depth: [2]}\ntune: {optim.lr: [0.001]}\n",
        "store_up.yaml": G + "axes: {model.depth: [2]}\nstore: ../x\n",
        "then_bad.yaml": G + "axes: {model.depth: [2]}\nthen: {nosuch: x}\n",
        "isoflop_cap.yaml": G
        + "isoflop: {budgets: ["
        + ", ".join(f"{k}.0e+15" for k in range(1, 401))
        + "], depths: ["
        + ", ".join(str(d) for d in range(1, 401))
        + "]}\n",
        "duplicate_key.yaml": G + "axes: {model.depth: [2]}\naxes: {model.depth: [4]}\n",
        "tabs.yaml": G + "axes:\n\tmodel.depth: [2]\n",
        "run_dir.yaml": G + "axes: {model.depth: [2]}\nfixed: {run.dir: /tmp/x}\n",
        "no_runs.yaml": G + "description: nothing to run\n",
        "widths_huge.yaml": G + "fixed: {model.depth: 1, model.widths: [99999999999]}\nruns: [{}]\n",
        "vocab_huge.yaml": "groups: {model: vwt, data: memmap}\nfixed: {data.vocab_size: 99999999999}\n"
        "axes: {model.depth: [2]}\n",
    }
)
BIG = {  # written only for the case that reads it (a few MB each)
    "description_2mb.yaml": ("description: " + "x" * (2 << 20) + "\n" + G + "axes: {model.depth: [2]}\n").encode(),
    "not_utf8.yaml": b"description: \xff\xfe\xfd\n" + G.encode() + b"axes: {model.depth: [2]}\n",
}
BOUNDED = ("depth", "width", "quantum", "heads", "head_dim", "n_experts", "top_k", "expert_hidden")
TRAIN_ARGS = ("model.depth=2", "model.width=64")

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
    # issue 38: hostile sweep files (SWEEPS above too), each refused in one line before it is expanded
    *[("sweep", name[:-5], "--dry-run") for name in BIG],
    # every bounded integer of the model: zero, negative, past its cap, a boolean, a word
    *[("train", *TRAIN_ARGS, f"model.{k}={v}") for k in BOUNDED for v in ("0", "-3", "99999999999", "true", "abc")],
    ("train", "model.depth=1", "model.widths=[99999999999]"),
    ("train", "model.depth=1", "model.widths=[true]"),
    ("train", "model.depth=2", "model.widths=[64]"),
    ("train", "model.depth=99999999999"),
    ("train", "model.width=99999999936", "model.heads=4", "model.head_dim=null"),
    ("train", "model.width=1048575", "model.heads=3", "model.head_dim=null", "model.depth=1"),
    ("train", "model.vocab_size=99999999999"),
    ("train", "data=memmap", "data.vocab_size=99999999999"),
    ("train", "data.vocab_size=0"),
    ("train", "data.val_fraction=0.9"),
    ("train", "data=synthetic", "data.order=9"),
    # the override's own syntax
    ("train", "=3"),
    ("train", "model.width=３２"),
    ("train", "x=[1,"),
    ("train", "nokey"),
    ("train", "run.dir=/tmp/ñandú"),
    ("train", "model.width=${nosuch.key}"),
    ("train", "model.width=3 2"),
    ("train", "model.width="),
    # the rest of a run's settings, and the override's own syntax
    *[
        ("train", *TRAIN_ARGS, *extra)
        for extra in (
            ("run.dir=/proc/x",),
            ("run.dir=/dev/null/x",),
            ("train.seq_len=0",),
            ("train.batch_size=3", "train.micro_batch_size=2"),
            ("train.steps=-1",),
            ("train.budgets=[-1]",),
            ("train.budgets=[abc]",),
            ("optim.lr=nan",),
            ("optim.lr=inf",),
            ("optim.grad_clip=-1",),
            ("optim.min_lr_ratio=2",),
            ("probe.every=abc",),
            ("run.seed=1.5",),
            ("train.device=gpu",),
            ("train.parallel=tensor",),
            ("model.mlp=relu",),
            ("model.norm=batchnorm",),
            ("model.ratio=0",),
            ("model.match=close",),
            ("model.embed=last",),
        )
    ],
    # dw sweep: the same through a sweep's command line
    *[
        ("sweep", "demo", "--dry-run", *extra)
        for extra in (
            ("model.width=99999999999",),
            ("model.depth=1000000000",),
            ("model.heads=0",),
            ("=3",),
            ("model.width=３２",),
            ("run.dir=/tmp/x",),
            ("run.sweep=x",),
            ("~model.width",),
            ("model.width=32,64",),
            ("--mfu", "2"),
            ("--cpu-peak", "0"),
            ("launcher=local", "launcher.workers=-1"),
            ("launcher=slurm", "launcher.time=never"),
            ("pack=0",),
        )
    ],
    # dw fit: more options
    *[
        ("fit", "--runs", "good.csv", *extra)
        for extra in (
            ("--bootstrap", "1000000000000"),
            ("--bootstrap", "abc"),
            ("--ci", "0"),
            ("--ci", "1"),
            ("--ci", "nan"),
            ("--huber-delta", "-1"),
            ("--max-starts", "-5"),
            ("--holdout", "smallest"),
            ("--holdout", "largest:0"),
            ("--holdout", "largest:100"),
            ("--approach", "nosuch"),
            ("--tuned", "nosuch"),
            ("--metric", "acc"),
            ("--pin", "A"),
            ("--pin", "alpha=abc"),
            ("--law", "nosuch.yaml"),
            ("--columns", "garbage"),
            ("--columns", "nosuch=loss"),
            ("--where", "params>5"),
            ("--c-ref", "nan"),
            ("nosuchsweep",),
        )
    ],
    # dw shapes: every bounded number, and a few wrong words
    *[
        ("shapes", "x", "-w", "64", "-d", "4", *extra)
        for extra in (
            ("--vocab", "0"),
            ("--vocab", "99999999999"),
            ("--seq-len", "0"),
            ("--quantum", "0"),
            ("--quantum", "99999999999"),
            ("--heads", "0"),
            ("--heads", "99999999999"),
            ("--head-dim", "0"),
            ("--heads", "4", "--head-dim", "16"),
            ("--ratio", "2"),
            ("--ratio", "nan"),
            ("--turn", "0"),
            ("--turn", "99"),
            ("--match", "close"),
            ("--preset", "../x"),
        )
    ],
    ("sweep", "my sweep", "--dry-run"),
    ("sweep", "ñandú", "--dry-run"),
    ("sweep", "", "--dry-run"),
    ("fit", "--runs", "random.csv"),
    ("fit", "--runs", "empty.csv"),
    ("fit", "--runs", "list.json"),
    ("fit", "--runs", "table.xlsx"),
    ("fit", "nosuchsweep", "--root", "/proc/nope"),
    ("report", "--runs", "good.csv", "--plots", "/proc/nope"),
    ("report", "--runs", "good.csv", "--plots", "/dev/null/x"),
    ("report", "--runs", "good.csv", "--plots", "good.csv"),
    ("report", "--runs", "random.csv"),
    ("report", "--runs", "good.csv", "--columns", "loss=nosuch"),
    ("report", "--runs", "good.csv", "--format", ""),
    ("report", "--runs", "negative.csv", "--fit", "good.csv"),
    ("report", "../x"),
    ("shapes", "x", "-w", "1000000000000", "-d", "4"),
    ("shapes", "x", "-w", "64", "-d", "1000000000"),
    ("shapes", "x", "-w", "0", "-d", "4"),
    ("shapes", "x", "-w", "-64", "-d", "4"),
    ("shapes", "x", "-w", "abc", "-d", "4"),
    # dw status, clean, forget, simulate, export, eval, analyze, data
    ("status", ""),
    ("status", "a" * 200),
    ("status", "demo", "--interval", "-1", "--watch"),
    ("clean", "nosuch"),
    ("clean", "demo", "--keep", "some"),
    ("clean", "demo", "--force"),
    ("forget", "nosuch", "abc"),
    ("forget", "../x", "abc"),
    ("simulate", "demo", "--noise", "-1"),
    ("simulate", "demo", "--outliers", "2"),
    ("simulate", "demo", "--budgets", "nosuch"),
    ("simulate", "demo", "--name", "../x"),
    ("simulate", "demo", "--set", "garbage"),
    ("simulate", "demo", "--dcrit", "cubic"),
    ("simulate", "nosuch"),
    ("simulate", "runs_int"),
    ("export", "nosuchrun", "out"),
    ("export", ".", "/proc/nope"),
    ("export", ".", "out", "--dtype", "fp8"),
    ("eval", "nosuch"),
    ("analyze", "nosuch"),
    ("analyze", "../x"),
    ("data", "prepare", "--source", "good.csv", "--tokenizer", "byte", "--out", "/proc/nope"),
    ("suggest", "nosuch"),
    ("suggest", "demo", "--prior", "published", "--budget", "1", "model.width=abc"),
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


def test_the_table_has_two_hundred_distinct_cases():
    assert len(CASES) >= 200 and len(set(CASES)) == len(CASES)
    assert {c[0] for c in CASES} >= {"train", "sweep", "status", "fit", "report", "shapes", "data", "sync"}


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c)[:120] for c in CASES])
def test_bad_input_is_one_line_exit_2_nothing_written(argv, workdir, capsys):
    for name, data in BIG.items():
        if len(argv) > 1 and argv[1] == name[:-5]:
            (workdir / "sweeps" / name).write_bytes(data)
    before = _snapshot(workdir)
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert e.value.code == 2, (e.value.code, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("dw: error: "), err
    assert "Traceback" not in err + out
    assert _snapshot(workdir) == before  # nothing written


def test_suggest_names_the_override_that_refuses_every_candidate(workdir, capsys):
    """As dw sweep names it (before: "no candidate runs left ... widen them with --candidates")."""
    with pytest.raises(SystemExit) as e:
        main(["suggest", "demo", "--prior", "published", "--budget", "1", "model.width=abc"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "every one refused, e.g. bad value for model.width: 'abc'" in err, err
