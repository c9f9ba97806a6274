"""``dw eval``: downstream tasks (EleutherAI's lm-evaluation-harness) on trained checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from depthwidth.cli.render import console, emit_json, runs_progress, wide_console
from depthwidth.evals.run import BOOTSTRAP_ITERS, DEFAULT_BATCH_SIZE  # torch- and lm_eval-free at import


def eval_cmd(
    target: str = typer.Argument(..., help="a run directory, or a sweep name under the run store"),
    overrides: Optional[List[str]] = typer.Argument(
        None,
        help="with a sweep: launcher=local|slurm [launcher.KEY=V] [pack=N] submits the evaluations as one job "
        "array instead of running them here",
    ),
    tasks: str = typer.Option(
        ...,
        "--tasks",
        help="lm-eval tasks, comma-separated, e.g. lambada_openai,hellaswag; dw's built-in dw_heldout_cloze "
        "(offline: 4-way cloze on the run's own held-out text)",
    ),
    ckpt: str = typer.Option("final", "--checkpoint", help="final (the newest valid checkpoint) or a step"),
    limit: Optional[int] = typer.Option(None, "--limit", help="the first N documents of each task (a quick look)"),
    batch_size: int = typer.Option(DEFAULT_BATCH_SIZE, "--batch-size", help="requests per forward pass"),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda: where the model is rebuilt and run (fp32)"),
    include_path: Optional[str] = typer.Option(
        None, "--include-path", help="a directory of your own task YAMLs (local data files: works offline)"
    ),
    bootstrap_iters: int = typer.Option(
        BOOTSTRAP_ITERS, "--bootstrap-iters", help="the harness's bootstrap draws for stderrs (0: no stderr)"
    ),
    force: bool = typer.Option(
        False, "--force", help="evaluate a run again although eval.json holds the tasks (a task YAML that changed)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the eval document(s) instead of tables"),
    root: Optional[str] = typer.Option(
        None, "--root", help="run store root for a sweep name (default $DW_RUNS or ./runs)"
    ),
) -> None:
    """Score a run's checkpoint on lm-evaluation-harness tasks; results go to the run's eval.json.

    Example: dw eval runs/demo/3f2a1c0b9d8e --tasks lambada_openai,hellaswag --limit 200

    Example: dw eval demo --tasks hellaswag --device cuda    (every finished run of the sweep without it)

    Example: dw eval demo --tasks dw_heldout_cloze    (built in, offline: which of 4 continuations follows a
    context of the run's own validation text; written per data settings and seq_len, chance 0.25)

    Example: dw eval depth_delusion --tasks hellaswag --device cuda launcher=slurm   (one job array)

    Example: dw eval out/hf --tasks hellaswag   (an exported folder, by the harness's own hf model: a cross-check)

    eval.json keeps earlier tasks (a task evaluated again is replaced); its numbers become the run
    table's METRIC:TASK columns (acc:hellaswag) and dw report's downstream table.  Needs the hf
    extra (pip install 'depthwidth[hf]').  Exit codes: 0 ok; 1 the harness failed; 2 bad input
    (no such run, sweep, task or checkpoint; a run on synthetic data, which has no text tokenizer).
    """
    import importlib.util

    from depthwidth.core.errors import BadInput, bad
    from depthwidth.evals import run as evals

    if ckpt != "final" and not ckpt.isdigit():
        raise bad("--checkpoint", ckpt, "final or a checkpoint step")
    if limit is not None and limit < 1:
        raise bad("--limit", limit, "an integer >= 1 (documents per task)")
    if batch_size < 1:
        raise bad("--batch-size", batch_size, "an integer >= 1")
    if bootstrap_iters < 0:
        raise bad("--bootstrap-iters", bootstrap_iters, "an integer >= 0 (0: no stderr)")
    if importlib.util.find_spec("lm_eval") is None:
        raise BadInput("dw eval needs lm-eval, which is not installed (pip install 'depthwidth[hf]')")
    opts = dict(limit=limit, batch_size=batch_size, device=device, bootstrap_iters=bootstrap_iters)
    names = evals.parse_tasks(tasks)
    path = Path(target)
    if overrides:
        if path.is_dir() or "/" in target:
            raise bad("launcher", " ".join(overrides), "a sweep name to evaluate through a launcher (not a run dir)")
        return _submit(target, names, list(overrides), root, ckpt, include_path, opts, as_json)
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):  # before "nothing to do": bad is bad
        raise bad("--device", device, "cpu|cuda")
    if path.is_dir() and evals.is_export(path):  # a Hugging Face folder: the harness's own hf model
        docs = [evals.evaluate_export(path, names, include_path=include_path, **opts)]
        skipped = None
    elif path.is_dir() or "/" in target:  # a path: one run directory
        from depthwidth.track import evaldoc

        have = evaldoc.read(path)
        if not force and have and all(evaldoc.evaluated(have, t, ckpt, limit) for t in names):
            console(stderr=True).print(
                f"eval: {path} holds {', '.join(names)} already (checkpoint {ckpt}, limit {limit or 'all'}): nothing "
                "to do (--force evaluates again)"
            )
            docs = [have]
        else:
            docs = [evals.evaluate_run(path, names, ckpt, include_path=include_path, **opts)]
        skipped = None
    else:
        todo, skipped = evals.pending(target, names, root, ckpt, limit)
        docs = _sweep(evals, target, names, root, ckpt, include_path, opts, todo, quiet=as_json)
    if as_json:
        emit_json(docs if skipped is not None else docs[0])
    else:
        out = wide_console()
        for d in docs:
            _render(d, out)
    if skipped is not None:  # on stderr, --json or not: stdout is the document's
        console(stderr=True).print(
            f"eval: {len(docs)} run(s) evaluated in sweep {target}"
            + (f"; {skipped} run(s) not finished, skipped" if skipped else "")
        )


def _submit(name, tasks, overrides, root, ckpt, include_path, opts, as_json) -> None:
    """``dw eval SWEEP ... launcher=X``: one submission of the runs still to evaluate (sweep/evaluate.py)."""
    import os

    from depthwidth.sweep.evaluate import submit_evals

    if root:  # the submission's records (jobs/, manifest) and its tasks' store: this command's process only
        os.environ["DW_RUNS"] = str(Path(root).absolute())
    out = submit_evals(name, tasks, overrides, checkpoint=ckpt, include_path=include_path, root=root, **opts)
    if as_json:
        return emit_json(out)
    jobs = sorted({j["job_id"] for j in out["submitted"]})
    console().print(
        f"eval {name} ({', '.join(tasks)}): {len(out['submitted'])} run(s) submitted to launcher={out['launcher']}"
        + (f" as {len(jobs)} task(s): {jobs[0].split('_')[0]}" if jobs else "")
        + (f"; {len(out['in_flight'])} already being evaluated" if out["in_flight"] else "")
        + (f"; {out['unfinished']} not finished, skipped" if out["unfinished"] else ""),
        highlight=False,
        soft_wrap=True,
    )


def _sweep(evals, name, tasks, root, ckpt, include_path, opts, todo, quiet):
    with runs_progress("eval", len(todo), quiet) as progress:
        return evals.evaluate_sweep(name, tasks, root, ckpt, include_path=include_path, progress=progress, **opts)


def _f(v) -> str:
    """Four decimals; a perplexity in the millions (an untrained model) in four significant digits."""
    return "—" if v is None else format(v, ".4f" if abs(v) < 1e5 else ".4g")


def _render(doc: dict, out) -> None:
    """Every task of the run's eval.json (earlier evals' too: each row says its step and limit), one row per metric."""
    from rich.table import Table

    t = Table(title=f"run {doc['run_id']} · {doc['run_dir']}")
    for h in ("task", "metric", "value", "± stderr", "documents", "step", "limit"):
        t.add_column(h, justify="left" if h in ("task", "metric") else "right")
    for name, r in doc["tasks"].items():
        for metric, m in r["metrics"].items():
            t.add_row(
                name,
                metric,
                _f(m["value"]),
                _f(m["stderr"]),
                str(r.get("samples")),
                str(r["step"]),
                "all" if r["limit"] is None else str(r["limit"]),
            )
    out.print(t)
