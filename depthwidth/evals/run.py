"""``dw eval``'s library: lm-evaluation-harness tasks on a run's checkpoint -> eval.json; a sweep's finished runs.

    doc = evaluate_run("runs/demo/3f2a1c0b9d8e", ["lambada_openai", "hellaswag"], limit=200)
    docs = evaluate_sweep("demo", ["hellaswag"], progress=lambda done, total, run: ...)

The model is the run's checkpoint as ``train.analysis.load_model`` rebuilds it,
wrapped in ``harness.DwLM``; the tasks are the harness's own (``TaskManager``),
the task YAMLs of ``include_path`` and dw's built-ins (builtin.py: written for
each run, whose data and seq_len fix their items, then one more include path).  Results are merged into
``RUN_DIR/eval.json`` by task name, written atomically with a provenance block
(format: track/evaldoc.py).  ``train.eval_tasks`` calls ``at_end`` where the run
was launched (``dw train``, a launcher's task), after ``train()`` has returned:
the trainer sits below this stage and may not import it.

lm_eval (and torch) are imported inside the functions that use them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from pathlib import Path

from depthwidth.core import provenance
from depthwidth.core.atomic import write_json
from depthwidth.core.store import FileLock
from depthwidth.core.errors import BadInput, WorkFailed, bad, did_you_mean
from depthwidth.core.options import Option
from depthwidth.core.store import check_name, run_status, runs_root, store_runs
from depthwidth.evals.builtin import BUILTIN, task_dirs
from depthwidth.track import evaldoc

DEFAULT_BATCH_SIZE = 8
BOOTSTRAP_ITERS = 100_000  # the harness's default: stderrs comparable with published harness runs
NOT_METRICS = ("alias", "name", "sample_len", "samples")  # per-task entries of the harness's results

EVAL_OPTIONS = (  # dw eval's flags (cli/options.py makes them from this table)
    Option(
        "tasks",
        ...,
        "lm-eval tasks, comma-separated, e.g. lambada_openai,hellaswag; dw's built-in dw_heldout_cloze "
        "(offline: 4-way cloze on the run's own held-out text)",
        kind=str,
    ),
    Option("checkpoint", "final", "final (the newest valid checkpoint) or a step"),
    Option("limit", None, "the first N documents of each task (a quick look)", kind=int),
    Option("batch_size", DEFAULT_BATCH_SIZE, "requests per forward pass"),
    Option("device", "cpu", "cpu | cuda: where the model is rebuilt and run (fp32)"),
    Option("include_path", None, "a directory of your own task YAMLs (local data files: works offline)"),
    Option("bootstrap_iters", BOOTSTRAP_ITERS, "the harness's bootstrap draws for stderrs (0: no stderr)"),
    Option("force", False, "evaluate a run again although eval.json holds the tasks (a task YAML that changed)"),
    Option("as_json", False, "print the eval document(s) instead of tables", flag="--json"),
    Option("root", None, "run store root for a sweep name (default $DW_RUNS or ./runs)"),
)


def parse_tasks(spec) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` -> the task names, in order, once each."""
    parts = spec.split(",") if isinstance(spec, str) else list(spec or [])
    names = list(dict.fromkeys(str(p).strip() for p in parts if str(p).strip()))
    if not names:
        raise bad("--tasks", spec, "lm-eval task names separated by commas, e.g. lambada_openai,hellaswag")
    return names


def task_manager(tasks: list[str], include_path=None):
    """The harness's TaskManager, knowing every one of ``tasks`` (BadInput naming one it does not).
    ``include_path``: a directory of task YAMLs, or a list of them (--include-path, then the
    built-ins' directories).  Tasks that all lie in them are read from there alone: the harness's
    own index of some 14,000 tasks takes seconds to build."""
    from lm_eval.tasks import TaskManager

    dirs = include_path if isinstance(include_path, (list, tuple)) else [] if include_path is None else [include_path]
    paths = [str(p) for p in dirs]
    for p in paths:
        if not Path(p).is_dir():
            raise bad("--include-path", p, "a directory of lm-eval task YAML files")
    if paths:
        local = TaskManager(include_path=paths, include_defaults=False)
        if all(t in local.all_subtasks for t in tasks):
            return local
    tm = TaskManager(include_path=paths or None)
    for t in tasks:
        if t not in tm.all_tasks:
            where = f"lm-eval {_harness_version()}, dw's built-in {', '.join(BUILTIN)}"
            where += f" or {', '.join(paths)}" if paths else ""
            raise BadInput(
                f"unknown task {t!r}: {did_you_mean(t, [*BUILTIN, *tm.all_tasks])}(allowed: a task, group or tag "
                f"of {where}; --include-path DIR adds task YAMLs)"
            )
    return tm


def evaluate_run(
    run_dir,
    tasks,
    checkpoint: str | int = "final",
    *,
    limit: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device="cpu",
    include_path=None,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
    managers: dict | None = None,
    write: bool = True,
) -> dict:
    """Evaluate one run's checkpoint on ``tasks``; the run's eval.json with them merged in (written
    unless ``write`` is False).  ``limit``: the first N documents of each task (the harness's).
    ``managers``: TaskManagers by (tasks, include paths), kept by the caller across a sweep's runs."""
    from depthwidth.evals.harness import DwLM

    tasks = parse_tasks(tasks)
    _check_counts(limit, bootstrap_iters)
    run_dir = Path(run_dir)
    lm = DwLM(run_dir, checkpoint, device, batch_size)
    mine = [] if include_path is None else [include_path]
    paths = [str(p) for p in mine + task_dirs(tasks, lm.run_cfg, lm.text)]
    key = (tuple(tasks), tuple(paths))  # runs of a sweep on the same data share their built-ins' directory
    managers = {} if managers is None else managers
    if key not in managers:
        managers[key] = task_manager(tasks, paths)
    results = _harness(lm, managers[key], tasks, limit, bootstrap_iters)
    record = {
        "checkpoint": "final" if checkpoint in (None, "final") else int(checkpoint),
        "step": lm.step,
        "limit": limit,
        "batch_size": lm.batch_size,
        "bootstrap_iters": bootstrap_iters,
        "device": str(lm.device),
    }
    return _save(run_dir, lm.run_cfg.get("run_id"), results, tasks, record, write)


def _check_counts(limit, bootstrap_iters) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise bad("--limit", limit, "an integer >= 1 (documents per task)")
    if isinstance(bootstrap_iters, bool) or not isinstance(bootstrap_iters, int) or bootstrap_iters < 0:
        raise bad("--bootstrap-iters", bootstrap_iters, "an integer >= 0 (0: no stderr)")


def _save(where: Path, run_id, results: dict, tasks: list[str], record: dict, write: bool, model: str | None = None):
    """One evaluation as eval.json's tasks (each its metrics beside ``record``: checkpoint, step,
    limit, batch size, bootstrap draws, device; the harness version and provenance added here),
    merged into ``where``'s eval.json, written unless ``write`` is False."""
    device = record.pop("device")
    record = {**record, "harness": _harness_version(), "provenance": provenance.record(device=device, precision="fp32")}
    new = {
        "schema": evaldoc.SCHEMA,
        **({"model": model} if model else {}),
        "run_id": run_id,
        "run_dir": str(where),
        "tasks": {name: {**_task_record(results, name), **record} for name in results["results"]},
    }
    for name in tasks:  # a tag: the harness reports its tasks, not it; recorded so that a sweep knows it is done
        new["tasks"].setdefault(name, {"metrics": {}, **record})
    return write_merged(where, new) if write else evaldoc.merge(evaldoc.read(where), new)


def write_merged(run_dir, new: dict) -> dict:
    """Merge ``new`` into the run's eval.json and write it, under RUN_DIR/.eval.lock: two evals of one
    run at once (``dw eval`` and the run's own ``train.eval_tasks``) both keep their tasks."""
    with FileLock(Path(run_dir) / ".eval.lock"):
        doc = evaldoc.merge(evaldoc.read(run_dir), new)
        write_json(evaldoc.path_for(run_dir), doc)
    return doc


def is_export(path) -> bool:
    """A Hugging Face folder (``dw export``'s, or any): config.json and no run config.yaml."""
    p = Path(path)
    return (p / "config.json").is_file() and not (p / "config.yaml").is_file()


def evaluate_export(
    folder,
    tasks,
    *,
    limit: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device="cpu",
    include_path=None,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
    write: bool = True,
) -> dict:
    """An exported folder scored by the harness's own ``hf`` model (the cross-check of ``dw eval``
    on the run it came from); FOLDER/eval.json, the same format, ``model: hf``.  The prefix token
    comes from the export's ``dw.tokenizer.prefix_token_id`` (pydoc has no end-of-text token) and
    remote code is trusted where the folder names its own (``auto_map``: dw's modeling file)."""
    from depthwidth.evals.builtin import BUILTIN

    tasks = parse_tasks(tasks)
    _check_counts(limit, bootstrap_iters)
    folder = Path(folder)
    if own := [t for t in tasks if t in BUILTIN]:
        raise bad("--tasks", own[0], "tasks other than dw's built-ins for an exported folder (they read the run)")
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        raise bad("RUN_DIR", str(folder), "a run directory, a sweep, or an exported folder with config.json") from None
    args = {"pretrained": str(folder), "dtype": "float32"}  # device and batch size: simple_evaluate passes them
    args["trust_remote_code"] = "auto_map" in cfg
    prefix = ((cfg.get("dw") or {}).get("tokenizer") or {}).get("prefix_token_id")
    if prefix is not None:
        args["prefix_token_id"] = int(prefix)
    results = _harness("hf", task_manager(tasks, include_path), tasks, limit, bootstrap_iters, batch_size, device, args)
    dw = cfg.get("dw") or {}
    record = {
        "checkpoint": "export",
        "step": dw.get("checkpoint_step"),
        "limit": limit,
        "batch_size": batch_size,
        "bootstrap_iters": bootstrap_iters,
        "device": str(device),
    }
    return _save(folder, dw.get("run_id"), results, tasks, record, write, model="hf")


def _harness(lm, manager, tasks, limit, bootstrap_iters: int, batch_size=None, device=None, model_args=None) -> dict:
    """The harness's results for ``tasks``: its prints go to stderr (stdout is ``--json``'s), its
    per-task notices are silenced; its own failures are the work's (exit 1), ours pass through."""
    import lm_eval

    log = logging.getLogger("lm_eval")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(sys.stderr), _without_env_report():
            return lm_eval.simple_evaluate(
                model=lm,
                model_args=model_args,
                tasks=tasks,
                task_manager=manager,
                limit=limit,
                bootstrap_iters=bootstrap_iters,
                batch_size=lm.batch_size if batch_size is None else batch_size,
                device=str(lm.device if device is None else device),
                log_samples=False,
            )
    except BadInput:
        raise
    except Exception as e:
        raise WorkFailed(f"lm-eval failed on {','.join(tasks)}: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def _without_env_report():
    """simple_evaluate adds torch's environment report (collect_env: subprocesses, ~2.5 s a call, 40 s
    over the demo's 16 runs) to every result; dw keeps none of it (eval.json has its own provenance)."""
    from lm_eval import evaluator

    saved = evaluator.add_env_info
    evaluator.add_env_info = lambda storage: None
    try:
        yield
    finally:
        evaluator.add_env_info = saved


def _task_record(results: dict, name: str) -> dict:
    """One task's (or group's) entry of eval.json from the harness's results."""
    row = results["results"][name]
    metrics = {}
    for key, v in row.items():
        metric, _, flt = key.partition(",")
        if metric in NOT_METRICS or metric.endswith("_stderr") or _number(v) is None:
            continue
        label = metric if flt in ("", "none") else f"{metric},{flt}"  # the harness's own name for it
        se = row.get(f"{metric}_stderr,{flt}" if flt else f"{metric}_stderr")
        metrics[label] = {"value": _number(v), "stderr": _number(se)}
    config = (results.get("configs") or {}).get(name)
    return {
        "metrics": metrics,
        "samples": ((results.get("n-samples") or {}).get(name) or {}).get("effective"),
        "task_version": (results.get("versions") or {}).get(name),
        "num_fewshot": (results.get("n-shot") or {}).get(name),
        "output_type": (config or {}).get("output_type"),
        "config_sha256": evaldoc.config_hash(config) if config is not None else None,  # a group has none
    }


def _number(v) -> float | None:
    """A metric value as JSON can hold it: None for the harness's "N/A" and non-finite values."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if x == x and abs(x) != float("inf") else None


def _harness_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lm_eval")
    except PackageNotFoundError:
        return None


# ---------------------------------------------------------------------------- a sweep


def pending(
    name: str, tasks, root=None, checkpoint: str | int = "final", limit: int | None = None
) -> tuple[list[Path], int]:
    """(the finished run directories of sweep ``name`` missing one of ``tasks`` at ``checkpoint`` on
    ``limit`` documents, how many of its runs are not finished).  Forgotten runs (dw forget) are not
    the sweep's."""
    tasks = parse_tasks(tasks)
    sweep = runs_root(root) / check_name(name, "RUN_DIR|SWEEP")
    if not sweep.is_dir():
        raise bad("RUN_DIR|SWEEP", name, f"a run directory or a sweep under {runs_root(root)} (set --root or DW_RUNS)")
    dirs, _ = store_runs(sweep, writing=True)  # the manifest's runs (forgotten ones left out), never a copy of one
    runs = [d for d in sorted(dirs.values()) if (d / "config.yaml").is_file()]
    done = [d for d in runs if run_status(d) == "done"]
    todo = []
    for d in done:
        doc = evaldoc.read(d)
        if not all(evaldoc.evaluated(doc, t, checkpoint, limit) for t in tasks):
            todo.append(d)
    return todo, len(runs) - len(done)


def evaluate_sweep(
    name: str,
    tasks,
    root=None,
    checkpoint: str | int = "final",
    *,
    limit: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    device="cpu",
    include_path=None,
    bootstrap_iters: int = BOOTSTRAP_ITERS,
    progress=None,
) -> list[dict]:
    """Evaluate every finished run of a sweep that lacks one of ``tasks`` (rerun: only the rest);
    ``progress(done, total, run_dir)`` is called after each run."""
    tasks = parse_tasks(tasks)
    todo, _ = pending(name, tasks, root, checkpoint, limit)
    managers: dict = {}  # built once per include paths: seconds
    out = []
    for i, d in enumerate(todo):
        out.append(
            evaluate_run(
                d,
                tasks,
                checkpoint,
                limit=limit,
                batch_size=batch_size,
                device=device,
                include_path=include_path,
                bootstrap_iters=bootstrap_iters,
                managers=managers,
            )
        )
        if progress is not None:
            progress(i + 1, len(todo), d)
    return out


def check(*, checkpoint: str, limit: int | None, batch_size: int, bootstrap_iters: int, **_) -> None:
    """``dw eval``'s numbers, and lm-eval installed (one line, exit 2, before anything is read); the
    other options (``**_``) are not checked here."""
    import importlib.util

    if checkpoint != "final" and not checkpoint.isdigit():
        raise bad("--checkpoint", checkpoint, "final or a checkpoint step")
    if limit is not None and limit < 1:
        raise bad("--limit", limit, "an integer >= 1 (documents per task)")
    if batch_size < 1:
        raise bad("--batch-size", batch_size, "an integer >= 1")
    if bootstrap_iters < 0:
        raise bad("--bootstrap-iters", bootstrap_iters, "an integer >= 0 (0: no stderr)")
    if importlib.util.find_spec("lm_eval") is None:
        raise BadInput("dw eval needs lm-eval, which is not installed (pip install 'depthwidth[hf]')")


def evaluate_target(
    target: str,
    tasks: list[str],
    *,
    checkpoint: str = "final",
    root=None,
    include_path=None,
    force: bool = False,
    progress=None,
    **opts,
) -> dict:
    """``dw eval TARGET`` here: an exported folder (the harness's own hf model), a run directory (not
    again where its eval.json holds the tasks, unless ``force``) or every finished run of a sweep
    still to evaluate.  ``opts``: limit, batch_size, device, bootstrap_iters.  ``progress(total)``: a
    context manager giving a sweep's ``progress(done, total, run_dir)`` callback.  {"docs": the eval
    documents, "skipped": a sweep's unfinished runs (None: not a sweep), "note": why nothing ran}."""
    device = opts.get("device", "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):  # before "nothing to do": bad is bad
        raise bad("--device", device, "cpu|cuda")
    path = Path(target)
    if path.is_dir() and is_export(path):  # a Hugging Face folder: the harness's own hf model
        return {
            "docs": [evaluate_export(path, tasks, include_path=include_path, **opts)],
            "skipped": None,
            "note": None,
        }
    if path.is_dir() or "/" in target:  # a path: one run directory
        have = evaldoc.read(path)
        limit = opts.get("limit")
        if not force and have and all(evaldoc.evaluated(have, t, checkpoint, limit) for t in tasks):
            note = (
                f"eval: {path} holds {', '.join(tasks)} already (checkpoint {checkpoint}, limit {limit or 'all'}): "
                "nothing to do (--force evaluates again)"
            )
            return {"docs": [have], "skipped": None, "note": note}
        return {
            "docs": [evaluate_run(path, tasks, checkpoint, include_path=include_path, **opts)],
            "skipped": None,
            "note": None,
        }
    todo, skipped = pending(target, tasks, root, checkpoint, opts.get("limit"))
    with progress(len(todo)) if progress is not None else contextlib.nullcontext() as cb:
        docs = evaluate_sweep(target, tasks, root, checkpoint, include_path=include_path, progress=cb, **opts)
    return {"docs": docs, "skipped": skipped, "note": None}


# ---------------------------------------------------------------------------- train.eval_tasks


def at_end(cfg, summary: dict, log) -> None:
    """train.eval_tasks: evaluate a finished run's final checkpoint on the tasks it has no result
    for yet, on the device it trained on (rank 0 only); a failure is a warning in the run's log,
    never the run's."""
    tasks = list(cfg.train.eval_tasks or [])
    if not tasks or summary.get("status") != "done" or os.environ.get("RANK", "0") != "0":
        return
    # where train.plan.prepare put the run
    run_dir = Path(cfg.run.dir) if cfg.run.dir else runs_root() / "adhoc" / str(summary["run_id"])
    try:
        doc = evaldoc.read(run_dir)
        todo = [t for t in tasks if not evaldoc.evaluated(doc, t)]
        if not todo:
            return
        doc = evaluate_run(run_dir, todo, device=_device(cfg.train.device))
        said = [f"{c} {v:.4f}" for c, (_, v) in evaldoc.columns(doc).items() if v is not None]
        log(f"eval: {evaldoc.path_for(run_dir)} ({', '.join(said[:6])}{' ...' if len(said) > 6 else ''})")
    except Exception as e:
        log(
            f"warning: eval failed ({type(e).__name__}: {' '.join(str(e).split())[:200]}); "
            f"rerun it with dw eval {run_dir} --tasks {','.join(tasks)}"
        )


def _device(train_device: str) -> str:
    """train.device as a device to load on: auto is CUDA when one is visible."""
    if train_device != "auto":
        return train_device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
