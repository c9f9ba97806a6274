"""Every option of ``dw simulate``, in one place: ``dw simulate``'s flags are made from ``SIMULATE_OPTIONS``
(cli/options.py); their names are ``simulate()``'s keywords, and ``NOISE_OPTIONS`` the fields of its ``Noise``.

Standard library only: ``dw --help`` builds the flags from this table.
"""

from __future__ import annotations

from depthwidth.core.options import Option

NOISE_OPTIONS = (
    Option("sigma", 0.005, "seed-to-seed noise: σ of log loss, one draw per run", flag="--noise"),
    Option("point", None, "σ of log loss per token budget (default noise/5)", flag="--point-noise", kind=float),
    Option("hetero", 0.0, "σ of a run ∝ (N/median N)^-hetero"),
    Option("outliers", 0.0, "fraction of runs whose loss is multiplied by exp(--outlier-size)"),
    Option("outlier_size", 0.1, "log-loss excess of an outlier run"),
)

SIMULATE_OPTIONS = (
    Option("name", None, "the store to write, ROOT/NAME (default SWEEP-sim)"),
    Option("law", "depth-delusion", "planted law: chinchilla | depth-delusion | width-depth"),
    Option("dcrit", "log", "depth-delusion D_crit form: log (kappa*ln W) | power (c*W^p)"),
    Option("irreducible", False, "depth-delusion: with an irreducible loss E"),
    Option(
        "set_values",
        None,
        "planted parameters, e.g. --set kappa=3,gamma=0.5 (default: near the paper's fit; docs/science.md §5)",
        flag="--set",
        kind=list,
    ),
    Option(
        "n_convention",
        None,
        "which parameter count the law reads as N: total | non-embedding | 12DW2 (default: the law's own)",
    ),
    *NOISE_OPTIONS,
    Option(
        "budgets",
        "sweep",
        "token budgets per run: sweep (the runs' own) or fractions of each run's tokens, e.g. 0.25,0.5,1",
    ),
    Option("seed", 0, "seed of the noise"),
    Option(
        "lr_curvature",
        0.04,
        "tuned sweeps (tune: optim.lr): log-loss rise per decade² of lr away from the planted lr* (docs/tuning.md)",
    ),
    Option("lr_exponent", 0.25, "tuned sweeps: planted lr* ∝ N^-exponent (N: a run's total parameters)"),
    Option("replace", False, "rewrite an existing simulated store (never a trained one)"),
    Option("only", None, "glob on run id, label or an override, as for dw sweep"),
    Option("root", None, "run store root (default $DW_RUNS or ./runs)"),
    Option("as_json", False, "print one JSON object (the store's world.json) instead of tables", flag="--json"),
)
