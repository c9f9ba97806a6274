"""``dw fit``: fit a loss law to a sweep's runs or to any run table, with intervals."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from depthwidth.cli.render import console, emit_json
from depthwidth.fit.defaults import default as D  # every default of dw fit: one home (fit/defaults.py)


def fit_cmd(
    name: Optional[str] = typer.Argument(None, help="sweep name: every token-budget point of every run in ROOT/NAME"),
    runs: Optional[Path] = typer.Option(None, "--runs", help="a run table (.csv, .jsonl, .parquet) instead of a sweep"),
    columns: Optional[str] = typer.Option(
        None,
        "--columns",
        help="map canonical names to the table's, e.g. loss=final_loss,params=params_active_precise (names: params, "
        "tokens, loss, depth, width, flops, seed, run)",
    ),
    law: str = typer.Option(
        D("law"),
        "--law",
        help="chinchilla | depth-delusion | width-depth | FILE.yaml: a user-defined law (a formula over the "
        "table's columns, parameters with bounds and starts; docs/user_laws.md) | lr: a tuned sweep's learning-rate "
        "laws (each group's lr* against N, depth and width; docs/tuning.md)",
    ),
    dcrit: str = typer.Option(
        D("dcrit"), "--dcrit", help="depth-delusion D_crit form: log (kappa*ln W) | power (c*W^p)"
    ),
    irreducible: bool = typer.Option(
        D("irreducible"), "--irreducible", help="depth-delusion: add an irreducible loss E"
    ),
    bootstrap: int = typer.Option(D("bootstrap"), "--bootstrap", help="bootstrap replicates for intervals (0: none)"),
    resample: str = typer.Option(
        D("resample"),
        "--resample",
        help="noise: keep the design, draw each run's seed noise afresh at the scale the residuals show (covers 95% "
        "on planted grids) | runs: resample whole runs (conservative)",
    ),
    pin: Optional[List[str]] = typer.Option(
        None, "--pin", help="fix parameters, e.g. --pin alpha=0.076 (repeatable or comma-separated)"
    ),
    compare: Optional[str] = typer.Option(
        None, "--compare", help="laws to compare on held-out runs, e.g. chinchilla,depth-delusion,width-depth"
    ),
    huber_delta: float = typer.Option(D("delta"), "--huber-delta", help="Huber delta on log residuals"),
    level: float = typer.Option(D("level"), "--ci", help="interval level"),
    seed: int = typer.Option(D("seed"), "--seed", help="seed of the bootstrap and of grid subsampling"),
    max_starts: int = typer.Option(
        D("max_starts"),
        "--max-starts",
        help="at most this many starts of the law's grid (a fixed-seed subset; chinchilla's full grid is 4,500)",
    ),
    probe_step: int = typer.Option(
        D("probe_step"), "--probe-step", help="probe step used for gradient persistence (nearest record)"
    ),
    root: Optional[str] = typer.Option(None, "--root", help="run store root (default $DW_RUNS or ./runs)"),
    where: Optional[List[str]] = typer.Option(
        None, "--where", help="fit only rows with COLUMN=VALUE, e.g. --where shape=uniform (repeatable)"
    ),
    source: str = typer.Option(
        "store", "--source", help="store (a sweep NAME or --runs FILE) | wandb (pull the run table from the W&B API)"
    ),
    project: Optional[str] = typer.Option(None, "--project", help="with --source wandb: ENTITY/PROJECT"),
    group: Optional[str] = typer.Option(None, "--group", help="with --source wandb: only runs of this group (sweep)"),
    match: bool = typer.Option(
        False,
        "--match",
        help="instead of a law fit: FLOPs to match uniform — fit L(C) = E + A·C^-alpha per width shape and give the "
        "fraction of the uniform model's FLOPs (mean width, KV cache) each shape needs to reach its loss at "
        "each size; a sweep writes ROOT/NAME/match.json (uses --bootstrap, --ci, --seed, --huber-delta, --where)",
    ),
    holdout: Optional[str] = typer.Option(
        None,
        "--holdout",
        help="largest[:K]: fit on all but the K largest runs by FLOPs (default 20%), predict theirs with prediction "
        "intervals; also the split of --compare's extrap. column",
    ),
    metric: Optional[str] = typer.Option(
        None,
        "--metric",
        help="METRIC:TASK (a column dw eval writes, e.g. acc:hellaswag): also fit the metric as a sigmoid of each "
        "run's final loss, so the loss law predicts it (two steps, as OLMo's and Marin's ladders do); with "
        "--holdout both steps predict the held-out runs' metric",
    ),
    tuned: Optional[str] = typer.Option(
        None,
        "--tuned",
        help="a tuned sweep (sweep file tune:): fit the law on each group's best run (best, the default) or on "
        "the loss at its interpolated optimum (interpolated: a parabola in log value through the best and its "
        "neighbours)",
    ),
    sensitivity: bool = typer.Option(
        False,
        "--sensitivity",
        help="refit under Huber delta 1e-4/1e-3/1e-2, a halved start grid, params without embeddings, the 5 "
        "highest-loss points dropped, first/last token budget per run; flag derived numbers that move more than "
        "their bootstrap interval is wide",
    ),
    approach: str = typer.Option(
        D("approach"),
        "--approach",
        help="3: the law on every point | isoflop: also per-budget parabola minima and their power laws in C "
        "(approach 2), compared with the law's",
    ),
    n_convention: Optional[str] = typer.Option(
        None,
        "--n-convention",
        help="which parameter count is N: total (params: every tensor) | non-embedding (params_non_embedding) | "
        "12DW2 (12·D·W²); default: the law's own (chinchilla total, depth-delusion 12DW2, width-depth total). "
        "D*, W* solve the same count",
    ),
    c_ref: float = typer.Option(
        D("c_ref"), "--c-ref", help="compute (FLOPs) at which N*, D*, W* and the local exponents are reported"
    ),
    isoflop_axis: str = typer.Option(
        D("isoflop_axis"),
        "--isoflop-axis",
        help="with --approach isoflop: params (model size at fixed C) | depth (shape at fixed params and tokens) "
        "| auto",
    ),
    pool_shapes: bool = typer.Option(
        D("pool_shapes"),
        "--pool-shapes",
        help="a law without a shape term on runs of several width shapes: fit every run (its verdict is withheld: "
        "the law cannot tell the shapes apart); default: the uniform runs only",
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", help="write the result JSON here (a sweep writes ROOT/NAME/fit.json)"
    ),
    no_write: bool = typer.Option(False, "--no-write", help="do not write fit.json"),
    force: bool = typer.Option(
        False,
        "--force",
        help="replace a sweep's fit.json that holds a fit of another law or --where filter (the one its report shows)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object instead of tables"),
) -> None:
    """Fit a loss law robustly (Huber on log loss, multi-start L-BFGS), with bootstrap intervals.

    Example: dw fit depth_delusion --law depth-delusion --bootstrap 1000

    Example: dw fit depth_delusion --law depth-delusion --n-convention total --c-ref 1e20

    Example: dw fit --runs gemstones.jsonl \
--columns loss=final_loss,params=params_active_precise,run=run_name --law width-depth

    Example: dw fit depth_delusion --law chinchilla --holdout largest:3 --compare chinchilla,width-depth

    Example: dw fit --runs gemstones.jsonl \
--columns loss=final_loss,params=params_active_precise,run=run_name --law chinchilla --sensitivity

    Example: dw fit isoflop_depth_cpu --law width-depth --approach isoflop

    Example: dw fit --source wandb --project me/depthwidth --group depth_delusion --law depth-delusion

    Example: dw fit demo --law chinchilla --metric acc:hellaswag --holdout largest:3

    Example: dw fit vwt_scaling --match --bootstrap 1000   (FLOPs to match uniform; needs ≥2 sizes per shape)
    """
    from depthwidth.fit.options import FitOptions

    opts = FitOptions(
        law=law,
        dcrit=dcrit,
        irreducible=irreducible,
        where=where,
        bootstrap=bootstrap,
        resample=resample,
        level=level,
        seed=seed,
        delta=huber_delta,
        max_starts=max_starts,
        pins=pin,
        compare=compare,
        holdout=holdout,
        sensitivity=sensitivity,
        approach=approach,
        isoflop_axis=isoflop_axis,
        n_convention=n_convention,
        c_ref=c_ref,
        probe_step=probe_step,
        metric=metric,
        tuned=tuned,
        pool_shapes=pool_shapes,
    )
    source_args = {"runs": runs, "columns": columns, "root": root, "source": source, "project": project, "group": group}
    if match:
        from depthwidth.fit.match import run_match

        res = run_match(name, **source_args, options=opts, out=out, write=not no_write)
        if as_json:
            emit_json(res)
        else:
            render_match(res)
        return
    from depthwidth.fit.pipeline import run_fit

    res = run_fit(name, **source_args, options=opts, out=out, write=not no_write, force=force)
    if as_json:
        emit_json(res)
        return
    render(res)


# what ``dw fit`` prints of report/fit_view.py's tables, in the report's order (report/render.py ORDER)
DCRIT_KEYS = ("dcrit_widths", "dcrit_models")


def render(res: dict) -> None:
    """The fit's tables, the ones ``dw report`` shows for it (report/fit_view.py), in the terminal."""
    from rich.markup import escape as esc

    from depthwidth.report.fit_view import fit_tables
    from depthwidth.report.optima import NOT_IDENTIFIED
    from depthwidth.report.render import ORDER, print_table

    c = console()
    if not c.is_terminal:  # piped output: do not squeeze the tables into 80 columns
        c.width = max(c.width, 120)
    for line in res.get("underdetermined") or []:  # before any number (fit/intervals.py)
        c.print(f"[bold yellow]before the numbers:[/bold yellow] {esc(line)}")
    T = fit_tables(res)
    if "dcrit" not in (res.get("derived") or {}):  # a law without D_crit: the paper's column alone says nothing
        for k in DCRIT_KEYS:
            T.pop(k, None)
    elif "dcrit_models" in T:  # production models this grid cannot reach: named in the table's note, no rows
        T["dcrit_models"].rows = [r for r in T["dcrit_models"].rows if r.get("measured") != NOT_IDENTIFIED]
    if "fit" in T:  # said above, before the numbers
        T["fit"].notes = [n for n in T["fit"].notes if not n.startswith("before the numbers: ")]
    for k in ORDER:
        if k in T:  # why an optimum is not identified is said once, in the identification table's notes
            print_table(T[k], c, skip=("note",) if k == "fit_optimal" else ())
    if res.get("written"):
        c.print(esc(f"wrote {res['written']}"))


def render_match(res: dict) -> None:
    """The two tables ``dw report`` shows for FLOPs to match, in the terminal."""
    from rich.markup import escape as esc

    from depthwidth.report.matching import match_tables
    from depthwidth.report.render import print_table

    c = console()
    if not c.is_terminal:
        c.width = max(c.width, 200)  # 15 columns: do not wrap the intervals
    for t in match_tables(res, "dw fit --match").values():
        print_table(t, c)
    if res.get("written"):
        c.print(esc(f"wrote {res['written']}"))
