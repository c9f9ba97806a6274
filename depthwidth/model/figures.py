"""The figures ``dw shapes`` prints: a shaped model against its uniform baseline.

Kept apart from the CLI so ``dw sweep --dry-run`` and ``dw report`` can reuse it.
"""

from __future__ import annotations

from depthwidth.config.compose import load_group
from depthwidth.core.errors import bad
from depthwidth.model import accounting, shapes
from depthwidth.model.resolve import from_config
from depthwidth.model.spec import ModelSpec


def figures(spec: ModelSpec, seq_len: int) -> dict:
    """Accounting figures of one spec, flat, for tables and JSON."""
    a = accounting.account(spec, seq_len)
    keys = ("params", "params_non_embedding", "params_active", "flops_per_token", "flops_attention_per_token",
            "kv_bytes_per_token", "mean_width")
    out = {k: a[k] for k in keys}
    terms = (shapes.moe_terms(spec.n_experts, spec.expert_hidden / spec.embed_width) if spec.mlp == "moe"
             else shapes.DENSE_TERMS)
    out["params_vwt"] = shapes.vwt_params(spec.widths, spec.embed_width, spec.vocab_size, terms)
    if spec.mlp == "moe":  # the paper's active count (solve_hparams.compute_active_params): the unrouted
        # experts' share of Σ 3·E·r·w_i² taken from the convention's total, its waste terms left as they are
        r = spec.expert_hidden / spec.embed_width
        idle = (1 - spec.top_k / spec.n_experts) * sum(3 * spec.n_experts * r * w * w for w in spec.widths)
        out["params_vwt_active"] = out["params_vwt"] - idle
    return out


def shape_report(family, *, width, depth, ratio=0.3, turn=None, match="vwt", vocab=100263,
                 preset="vwt", symmetric=None, quantum=None, seq_len=4096) -> dict:
    fam = shapes.canonical_family(family)
    if vocab < 1:
        raise bad("--vocab", vocab, "an integer >= 1")
    if seq_len < 1:
        raise bad("--seq-len", seq_len, "an integer >= 1")
    m = load_group("model", preset)
    width = int(m.width) if width is None else width
    depth = int(m.depth) if depth is None else depth
    m.vocab_size = vocab
    m.depth, m.width, m.shape, m.ratio, m.turn, m.match = depth, width, fam, ratio, turn, match
    m.symmetric = symmetric
    if quantum is not None:
        m.quantum = quantum
    m.widths = None
    # Validate the baseline first: a width the heads cannot divide is the user's error.
    uniform = from_config({**_plain(m), "shape": "uniform"})
    shaped = from_config(_plain(m))
    k = turn if turn is not None else shapes.default_turn(fam, depth)
    return {
        "family": fam,
        "width": width,
        "depth": depth,
        "ratio": ratio,
        "turn": k if fam in ("x", "diamond") else None,
        "symmetric": (fam in ("x", "diamond")) if symmetric is None else bool(symmetric and fam in ("x", "diamond")),
        "match": match,
        "quantum": int(m.quantum),
        "vocab": vocab,
        "preset": preset,
        "seq_len": seq_len,
        "moe": shaped.mlp == "moe",
        "widths": list(shaped.widths),
        "warning": shaped.extra.get("warning"),
        "uniform": figures(uniform, seq_len),
        "shaped": figures(shaped, seq_len),
    }


def _plain(node) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True)
