"""Every default of ``dw fit``, in one place: ``FitOptions`` (options.py) takes its field defaults
from here, the command's flags (cli/fit.py) show them, and ``dw config show fit`` lists them.

Standard library only: ``dw --help`` reads it without importing numpy.
"""

from __future__ import annotations

# name: (default, allowed, what it does) — the order of dw fit's documentation
FIT = {
    "law": ("chinchilla", "chinchilla | depth-delusion | width-depth | FILE.yaml | lr", "the law fitted"),
    "dcrit": ("log", "log | power", "depth-delusion's D_crit form: kappa*ln W | c*W^p"),
    "irreducible": (False, "true | false", "depth-delusion: an irreducible loss E"),
    "bootstrap": (200, "0 .. 100,000", "bootstrap replicates for intervals (0: none)"),
    "resample": ("noise", "noise | runs", "what a replicate redraws: each run's seed noise | whole runs"),
    "level": (0.95, "(0, 1)", "interval level (--ci)"),
    "seed": (0, ">= 0", "seed of the bootstrap and of start-grid subsampling"),
    "delta": (1e-3, "> 0", "Huber delta on log residuals (--huber-delta)"),
    "max_starts": (4500, ">= 1", "at most this many starts of the law's grid"),
    "approach": ("3", "3 | isoflop", "3: the law on every point; isoflop: approach 2 beside it"),
    "isoflop_axis": ("auto", "auto | params | depth", "the isoFLOP profile's axis"),
    "c_ref": (1e21, "> 0 FLOPs", "compute at which N*, D*, W* are reported"),
    "probe_step": (1000, ">= 0", "probe step of gradient persistence (nearest record)"),
    "pool_shapes": (False, "true | false", "a shape-blind law on several shapes: every run, no verdict"),
}


def default(name: str):
    return FIT[name][0]


def rows() -> list[dict]:
    """``dw config show fit``: one row per default, as the settings table has them."""
    return [
        {"key": f"fit.{k}", "variant": None, "default": d, "type": type(d).__name__, "allowed": a, "doc": doc}
        for k, (d, a, doc) in FIT.items()
    ]
