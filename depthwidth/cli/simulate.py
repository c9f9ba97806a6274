"""``dw simulate``: write a sweep's runs from a planted law, to ask what a grid can identify before training."""

from __future__ import annotations

from typing import List, Optional

import typer

from depthwidth.cli.render import emit_json, wide_console


def simulate_cmd(
    sweep: str = typer.Argument(
        ...,
        help="sweep file: sweeps/SWEEP.yaml (planned as dw sweep SWEEP --dry-run --no-data-check plans it: no data "
        "needed)",
    ),
    overrides: Optional[List[str]] = typer.Argument(None, help="overrides for every run, as for dw sweep"),
    name: Optional[str] = typer.Option(None, "--name", help="the store to write, ROOT/NAME (default SWEEP-sim)"),
    law: str = typer.Option("depth-delusion", "--law", help="planted law: chinchilla | depth-delusion | width-depth"),
    dcrit: str = typer.Option("log", "--dcrit", help="depth-delusion D_crit form: log (kappa*ln W) | power (c*W^p)"),
    irreducible: bool = typer.Option(False, "--irreducible", help="depth-delusion: with an irreducible loss E"),
    set_values: Optional[List[str]] = typer.Option(
        None,
        "--set",
        help="planted parameters, e.g. --set kappa=3,gamma=0.5 (default: near the paper's fit; docs/science.md §5)",
    ),
    n_convention: Optional[str] = typer.Option(
        None,
        "--n-convention",
        help="which parameter count the law reads as N: total | non-embedding | 12DW2 (default: the law's own)",
    ),
    sigma: float = typer.Option(0.005, "--noise", help="seed-to-seed noise: σ of log loss, one draw per run"),
    point: Optional[float] = typer.Option(
        None, "--point-noise", help="σ of log loss per token budget (default noise/5)"
    ),
    hetero: float = typer.Option(0.0, "--hetero", help="σ of a run ∝ (N/median N)^-hetero"),
    outliers: float = typer.Option(
        0.0, "--outliers", help="fraction of runs whose loss is multiplied by exp(--outlier-size)"
    ),
    outlier_size: float = typer.Option(0.1, "--outlier-size", help="log-loss excess of an outlier run"),
    budgets: str = typer.Option(
        "sweep",
        "--budgets",
        help="token budgets per run: sweep (the runs' own) or fractions of each run's tokens, e.g. 0.25,0.5,1",
    ),
    seed: int = typer.Option(0, "--seed", help="seed of the noise"),
    replace: bool = typer.Option(False, "--replace", help="rewrite an existing simulated store (never a trained one)"),
    only: Optional[str] = typer.Option(None, "--only", help="glob on run id, label or an override, as for dw sweep"),
    root: Optional[str] = typer.Option(None, "--root", help="run store root (default $DW_RUNS or ./runs)"),
    as_json: bool = typer.Option(
        False, "--json", help="print one JSON object (the store's world.json) instead of tables"
    ),
) -> None:
    """Write a planted world as a run store: every run of a sweep file with losses from a known law and noise.

    dw fit, dw report and dw status then run unchanged on known truth; dw fit
    compares what it finds with the planted values.

    Example: dw simulate depth_delusion --law depth-delusion --dcrit log --noise 0.005 --seed 1

    Example: dw fit depth_delusion-sim --law depth-delusion --bootstrap 200

    Example: dw simulate isoflop_depth --law width-depth --budgets 1 --name iso-sim
    """
    from depthwidth.simulate import Noise, simulate

    res = simulate(
        sweep,
        overrides or [],
        name=name,
        root=root,
        law=law,
        dcrit=dcrit,
        irreducible=irreducible,
        set_values=set_values,
        n_convention=n_convention,
        noise=Noise(sigma=sigma, point=point, hetero=hetero, outliers=outliers, outlier_size=outlier_size),
        budgets=budgets,
        seed=seed,
        replace=replace,
        only=only,
    )
    if as_json:
        emit_json(res)
        return
    render(res)


def render(res: dict) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    c = wide_console()
    w = res["world"]
    nz = w["noise"]
    c.print(
        esc(
            f"wrote {res['runs']} simulated runs ({res['points']} points) of sweep {res['sweep']} to {res['dir']} "
            f"in {res['seconds']:.2f} s"
        )
    )
    c.print(
        esc(
            f"planted: {w['label']}: {w['formula']}; N = {w['n_convention']}; noise σ {nz['sigma']:g} per run, "
            f"{nz['point']:g} per budget"
            + (f", hetero {nz['hetero']:g}" if nz["hetero"] else "")
            + (
                f", {100 * nz['outliers']:g}% outlier runs (+{nz['outlier_size']:g} in log loss)"
                if nz["outliers"]
                else ""
            )
            + f"; seed {res['seed']}"
        )
    )
    if res.get("scaled"):
        c.print(esc(f"scaled: {res['scaled']['why']}"))
    t = Table(title="planted truth (what dw fit should find)")
    t.add_column("number")
    t.add_column("planted", justify="right")
    for k, v in res["truth"].items():
        t.add_row(esc(k), "—" if v is None else f"{v:.4g}")
    c.print(t)
    c.print(
        esc(
            f"next: dw fit {res['name']} --law {w['law']}"
            + (f" --dcrit {w['options']['dcrit']}" if "dcrit" in w["options"] else "")
            + (" --irreducible" if w["options"].get("irreducible") else "")
            + " --bootstrap 200"
        )
    )
