"""Every option of ``dw shapes``, in one place: its flags are made from ``SHAPES_OPTIONS``
(cli/options.py), whose names are ``shape_report()``'s keywords (model/figures.py).

Standard library only: ``dw --help`` builds the flags from this table.
"""

from __future__ import annotations

from depthwidth.core.options import Option

SHAPES_OPTIONS = (
    Option(
        "width", None, "h: width of the uniform baseline (and embedding); default: the preset's", kind=int, short="-w"
    ),
    Option("depth", None, "L: number of layers; default: the preset's", kind=int, short="-d"),
    Option("ratio", 0.3, "ρ = narrowest width / h, in (0, 1]", short="-r"),
    Option("turn", None, "turning layer k in [1, L] (default 0.75·L for x, 0.5·L for diamond)", kind=int, short="-k"),
    Option(
        "match",
        None,
        "exact (true parameter count) | vwt (the paper's convention: no embeddings, norms or rounding); "
        "default: the preset's (exact for vwt, depth_delusion; vwt for the paper presets)",
    ),
    Option("vocab", 100263, "vocabulary size V (cl100k = 100263, GPT-2 = 50257)"),
    Option(
        "preset",
        "vwt",
        "model preset from conf/model (vwt | depth_delusion | vwt_200m | vwt_500m | vwt_1b | vwt_2b | moe_1b3b)",
    ),
    Option(
        "symmetric", None, "force w_1 = w_L (default on for x, diamond)", flag="--symmetric/--asymmetric", kind=bool
    ),
    Option("quantum", None, "round widths to a multiple of q (default: the preset's)", kind=int, short="-q"),
    Option(
        "heads",
        None,
        "fixed head count per layer (must divide every width); default: the preset's",
        kind=int,
        short="-H",
    ),
    Option("head_dim", None, "fixed head size instead (widths then multiples of it)", kind=int),
    Option("seq_len", 4096, "context length for attention FLOPs"),
    Option("as_json", False, "print one JSON object instead of a table", flag="--json"),
)
