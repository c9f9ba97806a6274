"""Every option of ``dw fit``, in one place: its default, what it allows and its help.

``FitOptions`` (options.py) takes its fields and defaults from here, ``dw fit``'s flags are made
from this table (cli/options.py), and ``dw config show fit`` lists it.  An option a new analysis
needs is one line here (and one field of ``FitOptions``, which a test keeps equal to this table).

Standard library only: ``dw --help`` reads it without importing numpy.
"""

from __future__ import annotations

from depthwidth.core.options import Option, table

FIT_OPTIONS = (
    Option(
        "law",
        "chinchilla",
        "chinchilla | depth-delusion | width-depth | FILE.yaml: a user-defined law (a formula over the table's "
        "columns, parameters with bounds and starts; docs/user_laws.md) | lr: a tuned sweep's learning-rate laws "
        "(each group's lr* against N, depth and width; docs/tuning.md)",
        "chinchilla | depth-delusion | width-depth | FILE.yaml | lr",
    ),
    Option("dcrit", "log", "depth-delusion D_crit form: log (kappa*ln W) | power (c*W^p)", "log | power"),
    Option("irreducible", False, "depth-delusion: add an irreducible loss E", "true | false"),
    Option(
        "where",
        None,
        "fit only rows with COLUMN=VALUE, e.g. --where shape=uniform (repeatable)",
        "COLUMN=VALUE",
        kind=list,
    ),
    Option("bootstrap", 200, "bootstrap replicates for intervals (0: none)", "0 .. 100,000"),
    Option(
        "resample",
        "noise",
        "noise: keep the design, draw each run's seed noise afresh at the scale the residuals show (covers 95% on "
        "planted grids) | runs: resample whole runs (conservative)",
        "noise | runs",
    ),
    Option("level", 0.95, "interval level", "(0, 1)", flag="--ci"),
    Option("seed", 0, "seed of the bootstrap and of grid subsampling", ">= 0"),
    Option("delta", 1e-3, "Huber delta on log residuals", "> 0", flag="--huber-delta"),
    Option(
        "max_starts",
        4500,
        "at most this many starts of the law's grid (a fixed-seed subset; chinchilla's full grid is 4,500)",
        ">= 1",
    ),
    Option(
        "pins",
        None,
        "fix parameters, e.g. --pin alpha=0.076 (repeatable or comma-separated)",
        "NAME=VALUE",
        flag="--pin",
        kind=list,
    ),
    Option(
        "compare",
        None,
        "laws to compare on held-out runs, e.g. chinchilla,depth-delusion,width-depth",
        "law names, comma-separated",
    ),
    Option(
        "holdout",
        None,
        "largest[:K]: fit on all but the K largest runs by FLOPs (default 20%), predict theirs with prediction "
        "intervals; also the split of --compare's extrap. column",
        "largest[:K]",
    ),
    Option(
        "sensitivity",
        False,
        "refit under Huber delta 1e-4/1e-3/1e-2, a halved start grid, params without embeddings, the 5 "
        "highest-loss points dropped, first/last token budget per run; flag derived numbers that move more than "
        "their bootstrap interval is wide",
        "true | false",
    ),
    Option(
        "approach",
        "3",
        "3: the law on every point | isoflop: also per-budget parabola minima and their power laws in C "
        "(approach 2), compared with the law's",
        "3 | isoflop",
    ),
    Option(
        "isoflop_axis",
        "auto",
        "with --approach isoflop: params (model size at fixed C) | depth (shape at fixed params and tokens) | auto",
        "auto | params | depth",
    ),
    Option(
        "n_convention",
        None,
        "which parameter count is N: total (params: every tensor) | non-embedding (params_non_embedding) | "
        "12DW2 (12·D·W²); default: the law's own (chinchilla total, depth-delusion 12DW2, width-depth total). "
        "D*, W* solve the same count",
        "total | non-embedding | 12DW2",
    ),
    Option("c_ref", 1e21, "compute (FLOPs) at which N*, D*, W* and the local exponents are reported", "> 0 FLOPs"),
    Option("probe_step", 1000, "probe step used for gradient persistence (nearest record)", ">= 0"),
    Option(
        "metric",
        None,
        "METRIC:TASK (a column dw eval writes, e.g. acc:hellaswag): also fit the metric as a sigmoid of each run's "
        "final loss, so the loss law predicts it (two steps, as OLMo's and Marin's ladders do); with --holdout both "
        "steps predict the held-out runs' metric",
        "METRIC:TASK",
    ),
    Option(
        "tuned",
        None,
        "a tuned sweep (sweep file tune:): fit the law on each group's best run (best, the default) or on the loss "
        "at its interpolated optimum (interpolated: a parabola in log value through the best and its neighbours)",
        "best | interpolated",
    ),
    Option(
        "pool_shapes",
        False,
        "a law without a shape term on runs of several width shapes: fit every run (its verdict is withheld: the "
        "law cannot tell the shapes apart); default: the uniform runs only",
        "true | false",
    ),
    Option(
        "match",
        False,
        "instead of a law fit: FLOPs to match uniform — fit L(C) = E + A·C^-alpha per width shape and give the "
        "fraction of the uniform model's FLOPs (mean width, KV cache) each shape needs to reach its loss at "
        "each size; a sweep writes ROOT/NAME/match.json (uses --bootstrap, --ci, --seed, --huber-delta, --where)",
        "true | false",
    ),
)
FIT = table(FIT_OPTIONS)


def default(name: str):
    return FIT[name].default


def rows() -> list[dict]:
    """``dw config show fit``: one row per option, as the settings table has them."""
    return [
        {
            "key": f"fit.{o.name}",
            "variant": None,
            "default": o.default,
            "type": "list" if o.kind is list else o.value_type.__name__,
            "allowed": o.allowed,
            "doc": f"{o.flags[0]}: {o.help}",
        }
        for o in FIT_OPTIONS
    ]
