"""``dw eval``: lm-evaluation-harness tasks on dw checkpoints (evals/), eval.json, the run table's
METRIC:TASK columns, sweeps, ``train.eval_tasks`` and the report's downstream table.

CPU and offline: one tiny run on pydoc bytes, three local task YAMLs over local jsonl files
(multiple choice, rolling log-likelihood, generation).  The harness's numbers are checked against
what the test computes by hand from dw's own model: the gold answers are planted from the model's
own preferences, so the accuracy the harness reports is known before it runs.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from importlib.metadata import version

import pytest
import torch
import torch.nn.functional as F

from tests.helpers import dw_in_process

pytest.importorskip("lm_eval")

TINY = [
    "model=vwt",
    "model.heads=4",
    "model.quantum=8",
    "model.depth=2",
    "model.width=32",
    "train.batch_size=8",
    "train.seq_len=32",
    "train.threads=1",
    "train.steps=20",
    "train.log_every=10",
    "optim.lr=3e-3",
    "probe.every=0",
]
T = 32  # train.seq_len: the model's context
NEWLINE = 10  # pydoc bytes: a document follows a blank line, so the prefix id is "\n"

QUESTIONS = [  # (question, choices); the last has a context longer than the model's window
    ("The return statement", ["leaves", "is", "x"]),
    ("A class definition", ["defines", "the", "7"]),
    ("An expression", ["yields", "object", "(", "is"]),
    ("Keywords are", ["reserved", "names"]),
    ("The for statement is used", ["to", "in", "{"]),
    ("When the loop ends normally, the else clause of the loop statement is", ["run", "skipped"]),
]
WRONG = (4, 5)  # planted: for these documents gold is not the model's choice
DOCS = [
    "The return statement leaves the current function call.",
    "Short text.",
    "A function definition defines a user-defined function object. It is executed when called, and "
    "the body runs with a new local namespace.",
]
PROMPTS = ["The return statement", "def", "Keywords are"]


def _ll(model, ids: list[int], n: int) -> float:
    """By hand: log p of the last ``n`` ids of ``ids`` given the ones before, in one window of T + 1."""
    ids = ids[-(T + 1) :]
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([ids[:-1]]))[0][0].double(), -1)
    return sum(logp[i, ids[i + 1]].item() for i in range(len(ids) - 1 - n, len(ids) - 1))


def _rolling(model, text: str) -> float:
    """By hand: every byte of ``text`` predicted once after "\\n", each window the T ids before it."""
    seq = [NEWLINE, *text.encode()]
    total, done = 0.0, 0
    while done < len(seq) - 1:
        end = min(done + T, len(seq) - 1)
        total += _ll(model, seq[max(0, end - T) : end + 1], end - done)
        done = end
    return total


def _greedy(model, prompt: str, until: list[str], most: int) -> str:
    ids, out = list(prompt.encode()), []
    while True:
        with torch.no_grad():
            out.append(int(model(torch.tensor([(ids + out)[-T:]]))[0][0, -1].argmax()))
        text = bytes(out).decode("utf-8", errors="replace")
        if len(out) >= most or any(u in text for u in until):
            break
    for u in until:
        text = text.split(u, 1)[0]
    return text


def _write_tasks(d, cache, mc, gen):
    def yaml(name, data, body):
        (d / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
        (d / f"{name}.yaml").write_text(
            f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {d / name}.jsonl\n"
            f"  cache_dir: {cache}\ntest_split: test\n{body}metadata:\n  version: 1.0\n"
        )

    yaml(
        "dw_mc",
        mc,
        'output_type: multiple_choice\ndoc_to_text: "{{question}}"\ndoc_to_choice: "{{choices}}"\n'
        'doc_to_target: "{{answer}}"\nmetric_list:\n  - metric: acc\n  - metric: acc_norm\n',
    )
    yaml(
        "dw_ppl",
        [{"text": t} for t in DOCS],
        'output_type: loglikelihood_rolling\ndoc_to_text: ""\ndoc_to_target: "{{text}}"\n'
        "metric_list:\n  - metric: word_perplexity\n  - metric: bits_per_byte\n",
    )
    yaml(
        "dw_gen",
        gen,
        'output_type: generate_until\ndoc_to_text: "{{prompt}}"\ndoc_to_target: "{{answer}}"\n'
        'generation_kwargs:\n  until: ["\\n", "."]\n  max_gen_toks: 6\n  do_sample: false\n'
        "metric_list:\n  - metric: exact_match\n",
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A trained run in sweep ``sw`` and task YAMLs whose answers are planted from its model."""
    from depthwidth.config.compose import compose
    from depthwidth.train import train
    from depthwidth.train.analysis import load_model

    base = tmp_path_factory.mktemp("eval")
    run = base / "runs" / "sw" / "r1"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        assert train(compose([*TINY, f"run.dir={run}"]), handle_signals=False, log=lambda m: None)["status"] == "done"
        model, _, _ = load_model(run)
        mc, expect = [], {"acc": 0, "acc_norm": 0, "lls": []}
        for i, (q, choices) in enumerate(QUESTIONS):
            lls = [_ll(model, list(f"{q} {c}".encode()), len(c) + 1) for c in choices]
            best = max(range(len(lls)), key=lls.__getitem__)
            gold = (best + 1) % len(choices) if i in WRONG else best
            norm = max(range(len(lls)), key=lambda j: lls[j] / len(choices[j]))
            mc.append({"question": q, "choices": choices, "answer": gold})
            expect["acc"] += (gold == best) / len(QUESTIONS)
            expect["acc_norm"] += (gold == norm) / len(QUESTIONS)
            expect["lls"] += [((q, f" {c}"), ll) for c, ll in zip(choices, lls)]
        outs = [_greedy(model, p, ["\n", "."], 6) for p in PROMPTS]
        gen = [{"prompt": p, "answer": o if i == 0 else o + "?"} for i, (p, o) in enumerate(zip(PROMPTS, outs))]
        tasks = base / "tasks"
        tasks.mkdir()
        _write_tasks(tasks, base / "hf-cache", mc, gen)
        yield {"run": run, "root": base / "runs", "tasks": tasks, "model": model, "expect": expect, "outs": outs}


def _lm(world, batch_size):
    from depthwidth.evals.harness import DwLM

    return DwLM(world["run"], batch_size=batch_size)


def _requests(kind, args):
    from lm_eval.api.instance import Instance

    return [Instance(kind, {}, a, i) for i, a in enumerate(args)]


def test_loglikelihoods_and_greedy_text_are_dw_models_own_at_any_batch_size(world):
    lms = {b: _lm(world, b) for b in (1, 8)}
    assert lms[1].prefix_token_id == NEWLINE and lms[1].max_length == T
    pairs = [p for p, _ in world["expect"]["lls"]]
    got = {b: [ll for ll, _ in lm.loglikelihood(_requests("loglikelihood", pairs))] for b, lm in lms.items()}
    for (_, want), g1, g8 in zip(world["expect"]["lls"], got[1], got[8]):
        assert g1 == pytest.approx(want, abs=1e-4) and g8 == pytest.approx(g1, abs=1e-5)
    rolled = {
        b: lm.loglikelihood_rolling(_requests("loglikelihood_rolling", [(d,) for d in DOCS])) for b, lm in lms.items()
    }
    assert len(DOCS[2].encode()) > 3 * T  # several windows
    for doc, r1, r8 in zip(DOCS, rolled[1], rolled[8]):
        assert r1 == pytest.approx(_rolling(world["model"], doc), abs=1e-3) and r8 == pytest.approx(r1, abs=1e-5)
    asks = [(p, {"until": ["\n", "."], "max_gen_toks": 6}) for p in PROMPTS]
    for lm in lms.values():
        assert lm.generate_until(_requests("generate_until", asks)) == world["outs"]


def test_the_harness_reports_the_planted_accuracy_and_eval_json_records_it(world, capsys):
    from depthwidth.evals.run import evaluate_run
    from depthwidth.track import evaldoc

    code, out, err = dw_in_process(
        capsys, "eval", str(world["run"]), "--tasks", "dw_mc,dw_ppl,dw_gen", "--include-path", str(world["tasks"]),
        "--bootstrap-iters", "0", "--json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc == evaldoc.read(world["run"]) and sorted(doc["tasks"]) == ["dw_gen", "dw_mc", "dw_ppl"]
    mc = doc["tasks"]["dw_mc"]
    assert world["expect"]["acc"] == pytest.approx(4 / 6)  # planted: gold is the model's choice but in WRONG
    assert mc["metrics"]["acc"]["value"] == pytest.approx(world["expect"]["acc"], abs=1e-12)
    assert mc["metrics"]["acc_norm"]["value"] == pytest.approx(world["expect"]["acc_norm"], abs=1e-12)
    assert mc["samples"] == len(QUESTIONS) and mc["limit"] is None and mc["step"] == 20 and mc["checkpoint"] == "final"
    assert doc["tasks"]["dw_gen"]["metrics"]["exact_match"]["value"] == pytest.approx(1 / 3)  # planted: one of three
    lls = [_rolling(world["model"], d) for d in DOCS]
    words = sum(len(re.split(r"\s+", d)) for d in DOCS)
    wppl = doc["tasks"]["dw_ppl"]["metrics"]["word_perplexity"]["value"]
    assert wppl == pytest.approx(math.exp(-sum(lls) / words), rel=1e-6)
    for name, rec in doc["tasks"].items():
        assert rec["harness"] == version("lm_eval") and rec["task_version"] == 1.0
        assert re.fullmatch(r"[0-9a-f]{64}", rec["config_sha256"])
        assert rec["provenance"]["dw"] and rec["provenance"]["device"] == "cpu" and rec["provenance"]["git"]
    assert len({r["config_sha256"] for r in doc["tasks"].values()}) == 3
    # a second eval: same task -> same config hash, replaced (limit 2 now); other tasks kept
    again = evaluate_run(world["run"], ["dw_mc"], limit=2, include_path=world["tasks"], bootstrap_iters=0)
    assert sorted(again["tasks"]) == ["dw_gen", "dw_mc", "dw_ppl"]
    assert again["tasks"]["dw_mc"]["limit"] == 2 and again["tasks"]["dw_mc"]["samples"] == 2
    assert again["tasks"]["dw_mc"]["config_sha256"] == mc["config_sha256"]
    assert again["tasks"]["dw_ppl"] == doc["tasks"]["dw_ppl"]
    left = sorted(p.name for p in world["run"].iterdir() if "eval" in p.name)
    assert left == [".eval.lock", "eval.json"]  # no temp file left (the lock file of write_merged stays: empty)
    # a failed eval writes nothing
    before = evaldoc.path_for(world["run"]).read_bytes()
    code, _, err = dw_in_process(
        capsys, "eval", str(world["run"]), "--tasks", "dw_mc", "--include-path", str(world["tasks"]), "--device", "tpu"
    )
    assert code == 2 and evaldoc.path_for(world["run"]).read_bytes() == before
    evaluate_run(world["run"], ["dw_mc"], include_path=world["tasks"], bootstrap_iters=0)  # back to every document
    # asked again for what eval.json holds (same task, checkpoint and limit): nothing is evaluated or written
    before = evaldoc.path_for(world["run"]).read_bytes()
    argv = [
        "eval",
        str(world["run"]),
        "--tasks",
        "dw_mc",
        "--include-path",
        str(world["tasks"]),
        "--bootstrap-iters",
        "0",
    ]
    code, _, err = dw_in_process(capsys, *argv)
    assert code == 0 and "nothing to do" in err and evaldoc.path_for(world["run"]).read_bytes() == before
    doc = json.loads(before)
    doc["tasks"]["dw_mc"]["metrics"] = {}  # what only a new evaluation would fill in again
    evaldoc.path_for(world["run"]).write_text(json.dumps(doc))
    code, _, err = dw_in_process(capsys, *argv)
    assert code == 0 and evaldoc.read(world["run"])["tasks"]["dw_mc"]["metrics"] == {}
    code, _, err = dw_in_process(capsys, *argv, "--force")
    assert code == 0 and evaldoc.read(world["run"])["tasks"]["dw_mc"]["metrics"]["acc"]["value"] == pytest.approx(
        world["expect"]["acc"]
    )


def test_run_table_gets_a_metric_task_column_on_the_evaluated_step(world):
    from depthwidth.track.evaldoc import read
    from depthwidth.track.run_source import TABLE_COLUMNS, run_table

    df = run_table(world["root"] / "sw")
    assert {"acc:dw_mc", "acc_norm:dw_mc", "word_perplexity:dw_ppl", "exact_match:dw_gen"} <= set(df.columns)
    assert list(df.columns[: len(TABLE_COLUMNS)]) == list(TABLE_COLUMNS)
    row = df[df["step"] == 20].iloc[0]
    assert row["acc:dw_mc"] == pytest.approx(read(world["run"])["tasks"]["dw_mc"]["metrics"]["acc"]["value"])


def _copy(world, dest, status="done"):
    """The trained run as another run of a sweep: its directory's name is its run id."""
    shutil.copytree(world["run"], dest, ignore=shutil.ignore_patterns("eval.json"))
    p = dest / "summary.json"
    p.write_text(json.dumps({**json.loads(p.read_text()), "status": status, "run_id": dest.name}))
    return dest


def test_a_sweep_evaluates_its_finished_runs_without_results_once(world, capsys):
    sweep = world["root"] / "sw2"
    for name, status in (("a", "done"), ("b", "done"), ("c", "running")):
        _copy(world, sweep / name, status)
    argv = ["eval", "sw2", "--tasks", "dw_mc", "--root", str(world["root"]), "--include-path", str(world["tasks"])]
    code, out, err = dw_in_process(capsys, *argv, "--json")
    assert code == 0, err
    assert sorted(d["run_dir"].rsplit("/", 1)[1] for d in json.loads(out)) == ["a", "b"]
    assert "eval: 2 run(s) evaluated in sweep sw2; 1 run(s) not finished, skipped" in err
    code, out, err = dw_in_process(capsys, *argv, "--json")  # the rerun: nothing left to do
    assert code == 0 and json.loads(out) == [] and "eval: 0 run(s) evaluated" in err
    code, out, err = dw_in_process(capsys, *argv, "--limit", "3", "--json")  # a --limit result is another one
    assert code == 0 and len(json.loads(out)) == 2


def test_report_has_a_downstream_table_and_the_accuracy_figure(world, tmp_path):
    from depthwidth import report
    from depthwidth.report import figs

    data = report.load("sw2", root=world["root"])
    rep = report.build(data)
    t = rep["tables"]["downstream"]
    assert sorted(r["run"] for r in t.rows) == ["a", "b"]  # c is not finished
    assert {"acc:dw_mc", "acc_norm:dw_mc"} <= {c.key for c in t.cols} and t.rows[0]["loss"] is not None
    assert "Downstream tasks (lm-evaluation-harness)" in report.render_markdown(rep)
    fig = figs.accuracy_vs_loss(figs._plt(), data, rep, tmp_path)
    assert isinstance(fig, dict) and fig["file"] == "accuracy_vs_loss.png" and (tmp_path / fig["file"]).is_file()


def test_train_eval_tasks_scores_the_run_where_it_was_launched_and_only_warns_on_failure(world, capsys, monkeypatch):
    from depthwidth.evals import run as evals
    from depthwidth.launch.task import run_items
    from depthwidth.track import evaldoc

    local = evals.task_manager
    monkeypatch.setattr(evals, "task_manager", lambda tasks, include_path=None: local(tasks, world["tasks"]))
    monkeypatch.setenv("DW_RUNS", str(world["root"]))
    d = _copy(world, world["root"] / "hooks" / "r")
    over = [*TINY, f"run.dir={d}", "train.eval_tasks=[dw_mc]"]
    code, _, err = dw_in_process(capsys, "train", "--quiet", *over)  # already done: only the eval runs
    assert code == 0, err
    assert evaldoc.evaluated(evaldoc.read(d), "dw_mc")
    lines = []
    assert (
        run_items(
            "hooks",
            [{"run_id": "x", "overrides": [*over[:-1], "train.eval_tasks=[dw_mc,dw_ppl]"]}],
            "j",
            log=lines.append,
        )
        == 0
    )
    assert sorted(evaldoc.read(d)["tasks"]) == ["dw_mc", "dw_ppl"] and any("eval: " in ln for ln in lines)

    def boom(*a, **k):
        raise RuntimeError("the harness broke")

    monkeypatch.setattr(evals, "evaluate_run", boom)
    code, _, err = dw_in_process(capsys, "train", "--quiet", *over[:-1], "train.eval_tasks=[dw_gen]")
    assert code == 0 and "warning: eval failed (RuntimeError: the harness broke)" in err
    assert f"dw eval {d} --tasks dw_gen" in " ".join(err.split())


def test_tokenizers_of_the_runs_data(tmp_path):
    from depthwidth.core.errors import BadInput
    from depthwidth.evals.tokenizer import text_tokenizer

    bpe = text_tokenizer(
        {"name": "pydoc", "tokenizer": "bpe", "vocab_size": 300, "val_fraction": 0.1, "cache_dir": str(tmp_path)}, "r"
    )
    text = "The return statement.\n\nIt leaves."
    assert bpe.decode(bpe.encode(text)) == text and bpe.prefix == bpe.encode("\n\n")[-1] and bpe.eot is None
    from depthwidth.data.prepare import prepare

    (tmp_path / "docs").mkdir()
    for i in range(30):
        (tmp_path / "docs" / f"{i}.txt").write_text(f"document {i}: some text here.\n")
    prepare(str(tmp_path / "docs"), "byte", tmp_path / "tok", val_fraction=0.2, val_min_tokens=0)
    byte = text_tokenizer({"name": "memmap", "path": str(tmp_path / "tok"), "vocab_size": 257}, "r")
    assert byte.prefix == byte.eot == 256 and byte.encode("é") == [195, 169] and byte.decode([104, 105]) == "hi"
    with pytest.raises(BadInput, match="synthetic.*no text tokenizer"):
        text_tokenizer({"name": "synthetic", "vocab_size": 64}, "r")


@pytest.mark.parametrize(
    "args, words",
    [
        (["--tasks", "dw_nope"], "unknown task 'dw_nope'"),
        (["--tasks", "dw_mc", "--checkpoint", "999"], "--checkpoint: '999'"),
        (["--tasks", "dw_mc", "--checkpoint", "best"], "--checkpoint: 'best'"),
        (["--tasks", "dw_mc", "--device", "tpu"], "--device: 'tpu'"),
        (["--tasks", " , "], "--tasks"),
        (["--tasks", "dw_mc", "--limit", "0"], "--limit"),
        (["--tasks", "dw_mc", "synthetic"], "no text tokenizer"),
        (["--tasks", "dw_mc", "no-checkpoint"], "no valid checkpoint"),
        (["--tasks", "dw_broken", "broken-yaml"], "unknown task 'dw_broken'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(world, capsys, tmp_path, args, words):
    target, include = world["run"], world["tasks"]
    if "synthetic" in args:  # the same model, as if it had trained on the Markov chain
        args = args[:-1]
        target = _copy(world, tmp_path / "syn")
        cfg = (target / "config.yaml").read_text()
        (target / "config.yaml").write_text(cfg.replace("name: pydoc", "name: synthetic"))
    if "no-checkpoint" in args:  # a run whose checkpoints are gone (dw clean --keep none --force)
        args = args[:-1]
        target = _copy(world, tmp_path / "bare")
        shutil.rmtree(target / "ckpt")
    if "broken-yaml" in args:  # a task YAML the harness cannot read
        args = args[:-1]
        include = tmp_path / "broken"
        include.mkdir()
        (include / "dw_broken.yaml").write_text("task: dw_broken\ndataset_path: json\n  bad: [\n")
    code, out, err = dw_in_process(capsys, "eval", str(target), *args, "--include-path", str(include))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and words in lines[0] and "Traceback" not in err, err


def _record_many(run_dir: str, who: int, n: int) -> None:
    from depthwidth.evals.run import write_merged

    for i in range(n):
        write_merged(run_dir, {"schema": "dw.eval/1", "tasks": {f"t{who}_{i}": {"metrics": {"acc": i / n}}}})


def test_two_evals_of_one_run_at_once_keep_every_task(tmp_path):
    """eval.json's read-merge-write under RUN_DIR/.eval.lock: two processes recording 25 tasks each
    into one run leave all 50 (without the lock, each write would drop the other's latest)."""
    import multiprocessing as mp

    from depthwidth.track import evaldoc

    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_record_many, args=(str(tmp_path), w, 25)) for w in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    tasks = evaldoc.read(tmp_path)["tasks"]
    assert set(tasks) == {f"t{w}_{i}" for w in (0, 1) for i in range(25)}


def test_a_sweep_submits_its_evaluations_through_the_local_launcher_once(world, capsys, monkeypatch):
    """dw eval SWEEP ... launcher=local: the finished runs without the task become one submission of
    real detached workers (launch/submit.py kind=eval) that write their eval.json; asked again while
    they run or after, nothing is submitted twice."""
    import time

    from depthwidth.core.atomic import read_jsonl

    sweep = world["root"] / "sw3"
    for name, status in (("a", "done"), ("b", "done"), ("c", "running")):
        _copy(world, sweep / name, status)
    monkeypatch.setenv("DW_RUNS", str(world["root"]))
    argv = ["eval", "sw3", "--tasks", "dw_mc", "--include-path", str(world["tasks"]), "--bootstrap-iters", "0"]
    code, out, err = dw_in_process(capsys, *argv, "launcher=local", "launcher.workers=1", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert sorted(j["run_id"] for j in doc["submitted"]) == ["a", "b"] and doc["unfinished"] == 1
    code, out, err = dw_in_process(capsys, *argv, "launcher=local", "--json")  # in flight or done: none again
    assert code == 0 and json.loads(out)["submitted"] == [], err
    t0 = time.monotonic()
    while not all((sweep / r / "eval.json").is_file() for r in "ab"):
        assert time.monotonic() - t0 < 180, "the workers did not write eval.json"
        time.sleep(0.5)
    for r in "ab":
        acc = json.loads((sweep / r / "eval.json").read_text())["tasks"]["dw_mc"]["metrics"]["acc"]["value"]
        assert acc == pytest.approx(world["expect"]["acc"])  # the planted accuracy, as in-process
    events = [e for e in read_jsonl(sweep / "manifest") if e.get("event") == "eval_submit"]
    assert sorted(e["run_id"] for e in events) == ["a", "b"]  # one submission each, the runs' own records untouched
    code, out, err = dw_in_process(capsys, *argv, "launcher=local", "--json")
    assert code == 0 and json.loads(out)["submitted"] == []
    code, out, err = dw_in_process(capsys, *argv, "model.depth=4")  # dw eval trains nothing
    assert code == 2 and err.count("\n") == 1 and "model.depth=4" in err


# ---------------------------------------------------------------------------- the built-in dw_heldout_cloze


def _cloze_dirs(runs) -> list:
    """dw_heldout_cloze's directory as ``dw eval`` writes it for each of ``runs`` (their data, their seq_len)."""
    from depthwidth.evals.builtin import CLOZE, task_dirs
    from depthwidth.evals.tokenizer import text_tokenizer
    from depthwidth.train.analysis import load_model

    out = []
    for run in runs:
        _, cfg, _ = load_model(run)
        out += task_dirs(["hellaswag", CLOZE], cfg, text_tokenizer(cfg.data, run))  # only the built-in is written
    return out


def test_heldout_cloze_items_are_the_held_out_text_the_same_for_every_run_on_that_data(world, tmp_path, monkeypatch):
    from collections import Counter

    from depthwidth.core.atomic import read_jsonl
    from depthwidth.data.pydoc import pydoc_split
    from depthwidth.data.source import make_source
    from depthwidth.evals import builtin
    from depthwidth.evals.tokenizer import text_tokenizer
    from depthwidth.train.analysis import load_model

    monkeypatch.setenv("DW_CACHE_DIR", str(tmp_path / "cache"))
    twin = _copy(world, tmp_path / "twin")  # another run on the same data and seq_len
    dirs = _cloze_dirs([world["run"], twin, world["run"]])
    assert len(dirs) == 3 and len(set(dirs)) == 1 and dirs[0].parent == tmp_path / "cache" / "evals"
    items = read_jsonl(dirs[0] / "items.jsonl")
    _, cfg, _ = load_model(world["run"])
    text = text_tokenizer(cfg.data, world["run"])
    assert builtin.cloze_items(make_source(cfg.data, T), T, text) == items  # built again: the same items
    context, continuation = builtin.sizes(T)
    assert (context, continuation) == (26, 2) and len(items) >= 500
    _, val, _ = pydoc_split(cfg.data.val_fraction)
    for it in items:
        assert len(it["context"].encode()) == context and len(set(it["choices"])) == builtin.CHOICES
        assert all(len(c.encode()) == continuation and len((it["context"] + c).encode()) <= T for c in it["choices"])
        assert it["context"] + it["choices"][it["gold"]] in val  # the true continuation, where gold says
    also = [it for it in items if sum(it["context"] + c in val for c in it["choices"]) > 1]
    assert len(also) < len(items) // 50  # a distractor rarely continues the context somewhere too
    golds = Counter(it["gold"] for it in items)
    assert sorted(golds) == [0, 1, 2, 3] and min(golds.values()) > len(items) / 5  # drawn, not always one place
    assert builtin.heldout_cloze(cfg.data, 2 * T, text) != dirs[0]  # another seq_len: other items


def test_heldout_cloze_accuracy_is_the_runs_own_log_likelihoods(world, capsys, tmp_path, monkeypatch):
    from depthwidth.core.atomic import read_jsonl

    monkeypatch.setenv("DW_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("a", "b"):
        _copy(world, tmp_path / "runs" / "cz" / name)
    n = 60
    argv = ["eval", "cz", "--tasks", "dw_heldout_cloze", "--limit", str(n), "--root", str(tmp_path / "runs"), "--json"]
    code, out, err = dw_in_process(capsys, *argv)
    assert code == 0, err
    recs = [d["tasks"]["dw_heldout_cloze"] for d in json.loads(out)]
    assert len(recs) == 2 and recs[0]["config_sha256"] == recs[1]["config_sha256"]  # one task, the same items
    (d,) = (tmp_path / "cache" / "evals").glob("dw_heldout_cloze-*")
    items = read_jsonl(d / "items.jsonl")[:n]  # --limit: the first n documents
    acc = acc_norm = 0
    for it in items:
        ctx, choices = it["context"], it["choices"]
        moved = ctx[len(ctx.rstrip()) :]  # the harness moves a context's trailing spaces into the choice
        lls = [_ll(world["model"], list((ctx + c).encode()), len((moved + c).encode())) for c in choices]
        acc += max(range(4), key=lls.__getitem__) == it["gold"]
        acc_norm += max(range(4), key=lambda j: lls[j] / len(choices[j])) == it["gold"]
    for rec in recs:
        assert rec["samples"] == n and rec["output_type"] == "multiple_choice" and rec["task_version"] == 1.0
        assert rec["metrics"]["acc"]["value"] == pytest.approx(acc / n, abs=1e-12)
        assert rec["metrics"]["acc_norm"]["value"] == pytest.approx(acc_norm / n, abs=1e-12)
        assert 0 <= rec["metrics"]["acc"]["value"] <= 1 and rec["metrics"]["acc"]["stderr"] > 0
    code, _, err = dw_in_process(capsys, "eval", str(tmp_path / "runs" / "cz" / "a"), "--tasks", "dw_heldout_clozee")
    assert code == 2 and "unknown task 'dw_heldout_clozee': did you mean dw_heldout_cloze?" in err, err
