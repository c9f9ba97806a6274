"""``dw fit``: fit a loss law to a sweep's runs or to any run table, with intervals."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from depthwidth.cli.render import console, emit_json


def fit_cmd(
    name: Optional[str] = typer.Argument(None, help="sweep name: every token-budget point of every run in ROOT/NAME"),
    runs: Optional[Path] = typer.Option(None, "--runs", help="a run table (.csv, .jsonl, .parquet) instead of a sweep"),
    columns: Optional[str] = typer.Option(
        None,
        "--columns",
        help="map canonical names to the table's, e.g. loss=final_loss,params=params_active_precise (names: params, "
        "tokens, loss, depth, width, flops, seed, run)",
    ),
    law: str = typer.Option("chinchilla", "--law", help="chinchilla | depth-delusion | width-depth"),
    dcrit: str = typer.Option("log", "--dcrit", help="depth-delusion D_crit form: log (kappa*ln W) | power (c*W^p)"),
    irreducible: bool = typer.Option(False, "--irreducible", help="depth-delusion: add an irreducible loss E"),
    bootstrap: int = typer.Option(200, "--bootstrap", help="bootstrap replicates for intervals (0: none)"),
    resample: str = typer.Option(
        "noise",
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
    huber_delta: float = typer.Option(1e-3, "--huber-delta", help="Huber delta on log residuals"),
    level: float = typer.Option(0.95, "--ci", help="interval level"),
    seed: int = typer.Option(0, "--seed", help="seed of the bootstrap and of grid subsampling"),
    max_starts: int = typer.Option(
        4500,
        "--max-starts",
        help="at most this many starts of the law's grid (a fixed-seed subset; chinchilla's full grid is 4,500)",
    ),
    probe_step: int = typer.Option(
        1000, "--probe-step", help="probe step used for gradient persistence (nearest record)"
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
    sensitivity: bool = typer.Option(
        False,
        "--sensitivity",
        help="refit under Huber delta 1e-4/1e-3/1e-2, a halved start grid, params without embeddings, the 5 "
        "highest-loss points dropped, first/last token budget per run; flag derived numbers that move more than "
        "their bootstrap interval is wide",
    ),
    approach: str = typer.Option(
        "3",
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
        1e21, "--c-ref", help="compute (FLOPs) at which N*, D*, W* and the local exponents are reported"
    ),
    isoflop_axis: str = typer.Option(
        "auto",
        "--isoflop-axis",
        help="with --approach isoflop: params (model size at fixed C) | depth (shape at fixed params and tokens) "
        "| auto",
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


def _f(x, fmt="{:.4g}") -> str:
    return "—" if x is None else fmt.format(x)


def render(res: dict) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    from depthwidth.fit.verdicts import flags as verdict_flags
    from depthwidth.report.optima import optimal_table
    from depthwidth.report.render import print_table

    c = console()
    if not c.is_terminal:  # piped output: do not squeeze the tables into 80 columns
        c.width = max(c.width, 120)
    lvl = res.get("bootstrap", {}).get("level", 0.95)
    for line in res.get("underdetermined") or []:  # before any number (fit/intervals.py)
        c.print(f"[bold yellow]before the numbers:[/bold yellow] {esc(line)}")
    held = res.get("ci_withheld") or {}

    def _ci(cc, key=None):
        if key in held:
            return "withheld"
        return "—" if not cc else f"\\[{cc[0]:.4g}, {cc[1]:.4g}]"

    t = Table(title=esc(f"{res['law']}: {res['formula']}"))
    t.add_column("parameter")
    t.add_column("value", justify="right")
    t.add_column(f"{100 * lvl:.0f}% CI ({res.get('bootstrap', {}).get('resample', 'runs')})", justify="right")
    if res.get("seed_ci"):
        t.add_column("CI (seeds)", justify="right")
    t.add_column("")
    for k, v in res["params"].items():
        flags = []
        if k in res.get("pinned", {}):
            flags.append("pinned")
        if k in res.get("on_bound", []):
            flags.append("on bound")
        cc = res["ci"].get(k)
        if cc and cc[0] <= 0 <= cc[1] and k not in res.get("pinned", {}):
            flags.append("CI ∋ 0")
        if k in held:
            flags.append("interval withheld: see warnings")
        elif k in (res.get("ci_flagged") or {}):
            flags.append("interval flagged: few refits converged")
        row = [k, _f(v), _ci(cc, k)]
        if res.get("seed_ci"):
            row.append(_ci(res["seed_ci"].get(k)))
        row.append(", ".join(flags))
        t.add_row(*row)
    c.print(t)
    s = res["starts"]
    c.print(
        f"n = {res['n']} points, {res.get('n_runs')} runs · R² = {_f(res['r2'], '{:.4f}')} · "
        f"RMSE = {_f(res['rmse'], '{:.4g}')} nats · Huber objective = {_f(res['objective'], '{:.6g}')} · "
        f"starts {s['converged']}/{s['total']} converged, {s['in_best_basin']} in the best basin"
    )
    d = res.get("derived", {})
    if "dcrit" in d:
        dt = Table(title=f"D_crit = {d['dcrit']['formula']}")
        for col in ("model", "width", "depth", "D_crit [CI]", "depth / D_crit [CI]"):
            dt.add_column(col, justify="right", no_wrap=True)
        rng = verdict_flags(res)[1]

        def ok(key):  # D_crit below one layer: not identified (fit/verdicts.py)
            return rng.get(key, {}).get("identified", True)

        for w, v in d["dcrit"]["widths"].items():
            dt.add_row(
                "sweep",
                w,
                "",
                f"{_f(v['value'])} {_ci(v['ci'], f'dcrit[W={w}]')}" if ok(f"dcrit[W={w}]") else "not identified",
                "",
            )
        far = []  # production models this sweep cannot reach: one caption line, not rows of "not identified"
        for m, v in d["dcrit"]["reference"].items():
            if not ok(f"dcrit[{m}]"):
                far.append(m)
                continue
            dt.add_row(
                m,
                str(v["width"]),
                str(v["depth"]),
                f"{_f(v['dcrit'])} {_ci(v['dcrit_ci'], f'dcrit[{m}]')}",
                f"{_f(v['depth_over_dcrit'])} {_ci(v['depth_over_dcrit_ci'], f'depth_over_dcrit[{m}]')}",
            )
        if far:
            dt.caption = f"not identified this far from the sweep's widths: {', '.join(far)} (fit.json keeps them)"
        c.print(dt)
    opt_table = optimal_table(res)  # the report's own table: one rendering of the optima
    if opt_table is not None:  # why an optimum is not identified: said once, in the identification section below
        print_table(opt_table, c, skip=("note",))
    gp = d.get("gradient_persistence")
    if gp and gp.get("tau_law"):
        tl = gp["tau_law"]
        c.print(
            esc(
                f"gradient persistence: tau(W) ∝ W^{_f(tl['p'], '{:.3g}')} {_ci(tl['p_ci'])}, R² = "
                f"{_f(tl['r2'], '{:.3f}')}"
                f" over {tl['runs']} runs at step ≈ {gp['probe_step']}"
            )
        )
        gt = Table(title="D_crit: 1/e rule on gradient profiles vs the law")
        for col in ("width", "profiles", "censored", "law", "law CI"):
            gt.add_column(col, justify="right")
        for w, v in gp.get("dcrit_by_width", {}).items():
            gt.add_row(w, _f(v.get("profiles")), f"{v['censored']}/{v['runs']}", _f(v.get("law")), _ci(v.get("law_ci")))
        c.print(gt)
    if "compare" in res:
        cm = res["compare"]
        split = cm.get("extrapolation_split")
        tt = Table(title="law comparison (held-out errors in nats" + (f"; extrap.: {split}" if split else "") + ")")
        tt.add_column("law", no_wrap=True)
        for col in ("k", "R²", "RMSE", "LORO", "extrap.", "AIC", "BIC"):
            tt.add_column(col, justify="right")
        for r in cm["laws"]:
            tt.add_row(
                esc(r["law"]),
                str(r["k"]),
                _f(r["r2"], "{:.4f}"),
                _f(r["rmse"]),
                _f(r.get("loro_rmse")),
                _f(r.get("extrapolation_rmse")),
                _f(r["aic"], "{:.1f}"),
                _f(r["bic"], "{:.1f}"),
            )
        c.print(tt)
        b = cm["best"]
        c.print(
            esc(
                f"best: held-out (LORO) {b['loro']}, extrapolation {b['extrapolation']}, AIC {b['aic']}, BIC {b['bic']}"
            )
        )
        for key, order in (cm.get("rank") or {}).items():
            c.print(esc(f"rank by {key}: " + " < ".join(order)))
        if "dcrit_preference" in cm:
            c.print(
                esc(
                    f"D_crit form preferred by the data: {cm['dcrit_preference']['prefers']} (by "
                    f"{cm['dcrit_preference']['by']})"
                )
            )
    render_sections(c, res)
    if res["excluded"]:
        c.print(
            esc(
                "excluded: "
                + "; ".join(f"{e['run']} ({e['points']} pts, {e['reason']})" for e in res["excluded"][:20])
                + (" …" if len(res["excluded"]) > 20 else "")
            )
        )
    for w in res.get("warnings", []):
        if w not in (res.get("underdetermined") or []):
            c.print(f"[yellow]warning:[/yellow] {esc(w)}")
    for k, why in held.items():
        c.print(esc(f"withheld: the interval of {k}: {why}"))
    if res.get("written"):
        c.print(esc(f"wrote {res['written']}"))


def render_sections(c, res: dict) -> None:
    """What the fit rests on (identification, hold-out, isoFLOP, sensitivity, planted truth): the
    report's own tables (report/rests.py), printed as ``dw report`` prints them."""
    from depthwidth.report.render import print_table
    from depthwidth.report.rests import rest_tables

    for t in rest_tables(res).values():
        print_table(t, c)


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
