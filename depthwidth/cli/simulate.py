"""``dw simulate``: write a sweep's runs from a planted law, to ask what a grid can identify before training."""

from __future__ import annotations

from typing import List, Optional

import typer

from depthwidth.cli.options import taken, with_options
from depthwidth.report.render import emit_json, wide_console
from depthwidth.simulate.options import NOISE_OPTIONS, SIMULATE_OPTIONS  # dw simulate's options (simulate/options.py)


@with_options(SIMULATE_OPTIONS)
def simulate_cmd(
    sweep: str = typer.Argument(
        ...,
        help="sweep file: sweeps/SWEEP.yaml (planned as dw sweep SWEEP --dry-run --no-data-check plans it: no data "
        "needed)",
    ),
    overrides: Optional[List[str]] = typer.Argument(None, help="overrides for every run, as for dw sweep"),
    **kw,
) -> None:
    """Write a planted world as a run store: every run of a sweep file with losses from a known law and noise.

    dw fit, dw report and dw status then run unchanged on known truth; dw fit
    compares what it finds with the planted values.

    Example: dw simulate depth_delusion --law depth-delusion --dcrit log --noise 0.005 --seed 1

    Example: dw fit depth_delusion-sim --law depth-delusion --bootstrap 200

    Example: dw simulate isoflop_depth --law width-depth --budgets 1 --name iso-sim
    """
    from depthwidth.simulate import Noise, simulate

    noise = Noise(**taken((NOISE_OPTIONS,), kw))
    o = taken((SIMULATE_OPTIONS,), kw)
    as_json = o.pop("as_json")
    res = simulate(sweep, overrides or [], noise=noise, **o)
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
    if res.get("tuning"):  # a tuned sweep: the planted learning-rate optimum (simulate/world.py LrWorld)
        t = res["tuning"]
        c.print(
            esc(
                f"tuned: {len(t['optima'])} tuning groups over {t['key']}; planted {t['formula']}; c {t['c']:g}, "
                f"e {t['e']:g}, lr_mid {t['lr_mid']:.3g}, N_mid {t['N_mid']:.3g} (each group's lr*: world.json)"
            )
        )
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
