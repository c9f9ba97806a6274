"""``dw eval`` against the harness's own ``hf`` model on the run's ``dw export`` folder.

Two ways to score one checkpoint must give one answer: dw's model class (``DwLM``: dw's
forward, the run's own tokenizer) and lm-evaluation-harness's ``HFLM`` loading the exported
Hugging Face folder (transformers' forward, the exported tokenizer.json).  A difference would
mean the export or dw's scoring is wrong (tokenization, the window cut, the prefix token,
the gather), and published harness numbers of an exported model would not be dw's.

CPU and offline: two small runs on pydoc bytes, a uniform model (exported for the stock
LlamaForCausalLM) and a × shape (dw's modeling file, ``trust_remote_code``); two local tasks
through an include path: multiple choice (acc, acc_norm) and a LAMBADA-style cloze written as
the harness's lambada_openai is (context -> final word; acc = greedy, perplexity).  The cloze's
final words are planted from the uniform model's own greedy continuations, so its accuracy is
known before either model class runs.

The exported pydoc tokenizer has neither BOS nor EOS (pydoc has no end-of-text), so ``HFLM``
has no prefix token of its own: it is given dw's (``"\\n"``, what precedes a pydoc paragraph)
as ``prefix_token_id``.
"""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("lm_eval")

from tests.test_eval import NEWLINE, QUESTIONS, _requests  # noqa: E402

T = 32  # train.seq_len: the window both model classes cut contexts to
BASE = [
    "model=vwt",
    "model.heads=4",
    "model.quantum=8",
    "model.depth=2",
    "model.width=64",
    "train.batch_size=8",
    f"train.seq_len={T}",
    "train.threads=1",
    "train.log_every=100",
    "optim.lr=1e-2",
    "probe.every=0",
]
SHAPES = {  # name -> (overrides, exported class); 200 steps: greedy continuations are words, not one byte again
    "uniform": (["train.steps=200"], "LlamaForCausalLM"),
    "x": (["model.shape=x", "model.depth=4", "train.steps=200"], "DwForCausalLM"),
}
CLOZE = [  # contexts of the LAMBADA-style task: each longer than the window, so both cut it on the left
    "The return statement leaves the current function call with the",
    "A class definition defines a class object and binds it to the",
    "An expression statement evaluates the expression list and the",
    "The for statement is used to iterate over the elements of a",
    "When the loop ends normally, the else clause of the loop statement is run and",
    "The import statement finds a module, loads and initializes it, and",
    "Exceptions are raised when an error is detected in the",
    "The while statement repeats a block of code as long as the",
]
OTHER_WORD = "value"  # the final word of the documents not planted
MC, LAMBADA = "dwhf_mc", "dwhf_lambada"
SHORT = "The return statement leaves."  # fits one window: one forward predicts every byte
LONG = "A function definition defines a user-defined function object. It is executed when called."


def _train_and_export(root, name: str):
    from depthwidth.config.compose import compose
    from depthwidth.export.hf import export_run
    from depthwidth.train import train

    overrides, _ = SHAPES[name]
    run = root / "runs" / name
    assert (
        train(compose([*BASE, *overrides, f"run.dir={run}"]), handle_signals=False, log=lambda m: None)["status"]
        == "done"
    )
    doc = export_run(run, root / "hf" / name, dtype="fp32")
    return run, root / "hf" / name, doc


def _greedy_word(model, context: str) -> str | None:
    """The word the model continues ``context`` with, greedily, when it starts one (a space, then
    letters), else None."""
    ids, out = list(context.encode()), []
    for _ in range(8):
        with torch.no_grad():
            out.append(int(model(torch.tensor([(ids + out)[-T:]]))[0][0, -1].argmax()))
    text = bytes(out).decode("utf-8", errors="replace")
    word = text[1:].split(" ", 1)[0]
    return word if text.startswith(" ") and word.isalpha() else None


def _cloze_docs(model) -> tuple[list[dict], int]:
    """(the cloze's documents, how many end in the model's greedy word): every other context gets
    the greedy word where the model has one, the rest a word it does not choose."""
    docs, planted = [], 0
    for i, ctx in enumerate(CLOZE):
        word = _greedy_word(model, ctx) if i % 2 == 0 else None
        planted += word is not None
        docs.append({"text": f"{ctx} {word or OTHER_WORD}"})
    return docs, planted


def _write_tasks(d, cache, cloze: list[dict]) -> None:
    """The multiple-choice task and the cloze as task YAMLs over JSONL files (harness's ``json`` loader)."""

    def task(name, docs, body):
        (d / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in docs))
        (d / f"{name}.yaml").write_text(
            f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {d / name}.jsonl\n"
            f"  cache_dir: {cache}\ntest_split: test\n{body}metadata:\n  version: 1.0\n"
        )

    mc = [{"question": q, "choices": c, "answer": i % len(c)} for i, (q, c) in enumerate(QUESTIONS)]
    task(
        MC,
        mc,
        'output_type: multiple_choice\ndoc_to_text: "{{question}}"\ndoc_to_choice: "{{choices}}"\n'
        'doc_to_target: "{{answer}}"\nmetric_list:\n  - metric: acc\n  - metric: acc_norm\n',
    )
    task(  # lambada_openai's own templates and metrics
        LAMBADA,
        cloze,
        "output_type: loglikelihood\ndoc_to_text: \"{{text.split(' ')[:-1]|join(' ')}}\"\n"
        "doc_to_target: \"{{' '+text.split(' ')[-1]}}\"\nmetric_list:\n"
        "  - metric: perplexity\n    aggregation: perplexity\n    higher_is_better: false\n"
        "  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n",
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Both runs trained and exported, the tasks written (the cloze planted from the uniform model)."""
    from depthwidth.train.analysis import load_model

    root = tmp_path_factory.mktemp("eval_hf")
    made = {name: _train_and_export(root, name) for name in SHAPES}
    cloze, planted = _cloze_docs(load_model(made["uniform"][0])[0])
    assert planted >= 1  # a cloze accuracy of 0 would not tell greedy flags apart
    tasks = root / "tasks"
    tasks.mkdir()
    _write_tasks(tasks, root / "hf-cache", cloze)
    return {"made": made, "tasks": tasks, "cloze": cloze, "planted": planted}


def _hf_args(world, name: str) -> dict:
    """The harness's ``hf`` model on the exported folder, as a user would load it."""
    _, out, _ = world["made"][name]
    return {
        "pretrained": str(out),
        "trust_remote_code": SHAPES[name][1] == "DwForCausalLM",  # dw's modeling file
        "dtype": "float32",
        "device": "cpu",
        "batch_size": 8,
        "prefix_token_id": NEWLINE,  # the exported byte tokenizer has no BOS/EOS to fall back on
    }


@pytest.fixture(scope="module")
def lms(world):
    """name -> (DwLM on the run, HFLM on its exported folder), loaded once."""
    from lm_eval.models.huggingface import HFLM

    from depthwidth.evals.harness import DwLM

    return {
        name: (DwLM(run, batch_size=8), HFLM(**_hf_args(world, name))) for name, (run, _, _) in world["made"].items()
    }


def _pairs(world) -> list[tuple[str, str]]:
    """(context, continuation) requests as the tasks make them, plus an empty context (the prefix token)."""
    mc = [(q, f" {c}") for q, choices in QUESTIONS for c in choices]
    cloze = [tuple(d["text"].rsplit(" ", 1)) for d in world["cloze"]]
    return [*mc, *((ctx, f" {w}") for ctx, w in cloze), ("", SHORT), ("", "\nA paragraph.")]


@pytest.mark.parametrize("name", SHAPES)
def test_the_export_is_the_class_the_shape_maps_to(world, name):
    _, out, doc = world["made"][name]
    cfg = json.loads((out / "config.json").read_text())
    assert doc["class"] == SHAPES[name][1] == cfg["architectures"][0]
    assert ("auto_map" in cfg) == (name == "x") and cfg["max_position_embeddings"] == T


@pytest.mark.parametrize("name", SHAPES)
def test_loglikelihoods_and_greedy_flags_equal_the_harness_hf_models(world, lms, name):
    dw, hf = lms[name]
    assert hf.max_length == dw.max_length == T and hf.prefix_token_id == dw.prefix_token_id
    pairs = _pairs(world)
    for ctx, cont in pairs:  # the same ids go in: the exported tokenizer is the run's
        assert hf.tok_encode(ctx + cont) == dw.tok_encode(ctx + cont)
    ours = dw.loglikelihood(_requests("loglikelihood", pairs))
    theirs = hf.loglikelihood(_requests("loglikelihood", pairs))
    diff = max(abs(a - b) for (a, _), (b, _) in zip(ours, theirs))
    assert diff < 1e-4, f"max |dw - hf| log-likelihood {diff:.2e}"
    assert [g for _, g in ours] == [g for _, g in theirs]
    if name == "uniform":  # planted: the cloze's greedy words are greedy for both
        cloze = [g for (ctx, _), (_, g) in zip(pairs, ours) if ctx in CLOZE]
        assert sum(cloze) == world["planted"]


def _harness_metrics(results: dict, task: str) -> dict:
    return {k.split(",")[0]: v for k, v in results["results"][task].items() if k.endswith(",none")}


@pytest.mark.parametrize("name", SHAPES)
def test_dw_eval_reports_what_the_harness_hf_model_reports(world, name):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from depthwidth.evals.run import evaluate_run

    run, _, _ = world["made"][name]
    tasks = [MC, LAMBADA]
    ours = evaluate_run(run, tasks, include_path=world["tasks"], bootstrap_iters=0, write=False)["tasks"]
    theirs = lm_eval.simple_evaluate(
        model="hf",
        model_args=_hf_args(world, name),
        tasks=tasks,
        task_manager=TaskManager(include_path=str(world["tasks"]), include_defaults=False),
        bootstrap_iters=0,
        log_samples=False,
    )
    mc, cloze = _harness_metrics(theirs, MC), _harness_metrics(theirs, LAMBADA)
    assert ours[MC]["metrics"]["acc"]["value"] == mc["acc"]
    assert ours[MC]["metrics"]["acc_norm"]["value"] == mc["acc_norm"]
    assert ours[LAMBADA]["metrics"]["acc"]["value"] == cloze["acc"]
    assert ours[LAMBADA]["metrics"]["perplexity"]["value"] == pytest.approx(cloze["perplexity"], rel=1e-4)
    assert ours[MC]["samples"] == len(QUESTIONS) and ours[LAMBADA]["samples"] == len(CLOZE)
    if name == "uniform":
        assert cloze["acc"] == pytest.approx(world["planted"] / len(CLOZE), abs=1e-12)


def _own_loss_sum(model, text: str) -> float:
    """-(the model's own mean cross-entropy × tokens) over ``text``'s bytes after "\\n", window by
    window (each byte predicted once, from at most the T ids before it; targets already
    predicted are -1, which the model's loss ignores)."""
    seq = [NEWLINE, *text.encode()]
    total, done = 0.0, 0
    while done < len(seq) - 1:
        end = min(done + T, len(seq) - 1)
        start = max(0, end - T)
        x, y = torch.tensor([seq[start:end]]), torch.tensor([seq[start + 1 : end + 1]])
        y[0, : done - start] = -1
        with torch.no_grad():
            total -= model(x, y)[1].item() * (end - done)
        done = end
    return total


@pytest.mark.parametrize("name", SHAPES)
def test_rolling_loglikelihood_is_the_models_own_eval_loss(world, lms, name):
    from depthwidth.train.analysis import load_model

    dw, hf = lms[name]
    model = load_model(world["made"][name][0])[0]
    assert len(SHORT.encode()) < T < len(LONG.encode()) // 2  # one window; several windows
    ours = dw.loglikelihood_rolling(_requests("loglikelihood_rolling", [(SHORT,), (LONG,)]))
    for text, got in zip((SHORT, LONG), ours):
        assert got == pytest.approx(_own_loss_sum(model, text), abs=1e-3)
    theirs = hf.loglikelihood_rolling(_requests("loglikelihood_rolling", [(SHORT,), (LONG,)]))
    assert ours == pytest.approx(theirs, abs=1e-3)
    # the exported model's own loss on the same tokens (transformers shifts the labels itself)
    ids = torch.tensor([[NEWLINE, *SHORT.encode()]])
    with torch.no_grad():
        loss = hf.model(input_ids=ids, labels=ids).loss.item()
    assert ours[0] == pytest.approx(-loss * len(SHORT.encode()), abs=1e-3)


def test_a_pydoc_bpe_export_encodes_text_to_the_ids_dw_eval_scores(tmp_path):
    """The BPE half of "the same ids go in": dw's text tokenizer of a pydoc BPE run and the
    tokenizer.json ``dw export`` writes for it (read by transformers, as ``HFLM`` reads it)."""
    from transformers import AutoTokenizer

    from depthwidth.evals.tokenizer import text_tokenizer
    from depthwidth.export import tokenizer as hf_tokenizer

    data = {"name": "pydoc", "tokenizer": "bpe", "vocab_size": 300, "val_fraction": 0.1, "cache_dir": str(tmp_path)}
    ours = text_tokenizer(data, "r")
    hf_tokenizer.write(hf_tokenizer.for_run(data, T), tmp_path / "tok", T)
    theirs = AutoTokenizer.from_pretrained(str(tmp_path / "tok"))
    for text in (SHORT, LONG, " leading space", "def f(x):\n    return x\n\nIt  ends.", "é ü ∑"):
        assert theirs.encode(text) == ours.encode(text), text
    # no BOS or EOS here either: HFLM needs prefix_token_id = dw's prefix, the id that ends "\n\n"
    assert theirs.bos_token_id is None and theirs.eos_token_id is None
    assert theirs.decode([ours.prefix]) == "\n"


@pytest.mark.parametrize("name", SHAPES)
def test_dw_eval_of_an_exported_folder_runs_the_harness_hf_model_and_agrees_with_the_run(world, name, capsys):
    """dw eval EXPORT_DIR: the harness's own hf model on the folder (prefix token and remote code
    read from its config.json), eval.json written there; the same accuracies as dw eval of the run."""
    from depthwidth.evals.run import evaluate_run
    from tests.helpers import dw_in_process

    run, out, _ = world["made"][name]
    argv = ["eval", str(out), "--tasks", MC, "--include-path", str(world["tasks"]), "--bootstrap-iters", "0", "--json"]
    code, text, err = dw_in_process(capsys, *argv)
    assert code == 0, err
    doc = json.loads(text)
    ours = evaluate_run(run, [MC], include_path=world["tasks"], bootstrap_iters=0, write=False)["tasks"][MC]
    assert doc["model"] == "hf" and doc["tasks"][MC]["checkpoint"] == "export"
    assert doc["tasks"][MC]["metrics"]["acc"]["value"] == ours["metrics"]["acc"]["value"]
    assert (out / "eval.json").is_file()
    capsys.readouterr()  # the harness's progress bars of evaluate_run above
    code, text, err = dw_in_process(capsys, "eval", str(out), "--tasks", "dw_heldout_cloze")
    assert code == 2 and err.count("\n") == 1 and "built-ins" in err
