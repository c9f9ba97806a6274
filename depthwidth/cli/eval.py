"""``dw eval``: downstream tasks (EleutherAI's lm-evaluation-harness) on trained checkpoints."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import List, Optional

import typer

from depthwidth.cli.options import taken, with_options
from depthwidth.report.render import console, emit_json, runs_progress, wide_console
from depthwidth.evals.run import EVAL_OPTIONS  # torch- and lm_eval-free at import


@with_options(EVAL_OPTIONS)
def eval_cmd(
    target: str = typer.Argument(..., help="a run directory, or a sweep name under the run store"),
    overrides: Optional[List[str]] = typer.Argument(
        None,
        help="with a sweep: launcher=local|slurm [launcher.KEY=V] [pack=N] submits the evaluations as one job "
        "array instead of running them here",
    ),
    **kw,
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
    from depthwidth.evals import run as evals

    o = taken((EVAL_OPTIONS,), kw)
    as_json = o.pop("as_json")
    evals.check(**o)
    names = evals.parse_tasks(o.pop("tasks"))
    if overrides:
        return _submit(target, names, list(overrides), o, as_json)
    got = evals.evaluate_target(target, names, progress=partial(runs_progress, "eval", quiet=as_json), **o)
    if got["note"]:
        console(stderr=True).print(got["note"])
    docs, skipped = got["docs"], got["skipped"]
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


def _submit(name, tasks, overrides, o: dict, as_json) -> None:
    """``dw eval SWEEP ... launcher=X``: one submission of the runs still to evaluate (sweep/evaluate.py)."""
    import os

    from depthwidth.core.errors import bad
    from depthwidth.sweep.evaluate import submit_evals

    if Path(name).is_dir() or "/" in name:
        raise bad("launcher", " ".join(overrides), "a sweep name to evaluate through a launcher (not a run dir)")
    root, ckpt, include_path, _ = o.pop("root"), o.pop("checkpoint"), o.pop("include_path"), o.pop("force")
    if root:  # the submission's records (jobs/, manifest) and its tasks' store: this command's process only
        os.environ["DW_RUNS"] = str(Path(root).absolute())
    out = submit_evals(name, tasks, overrides, checkpoint=ckpt, include_path=include_path, root=root, **o)
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
