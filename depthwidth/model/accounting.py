"""Closed-form accounting of a ModelSpec: parameters, FLOPs, KV cache.

Pure Python, no torch: ``dw shapes`` and ``dw sweep --dry-run`` use it on
machines that never build a model.  It counts the exact tensors ``gpt.py``
builds (a test checks every option against ``model.parameters()``).

Conventions
-----------
Parameters
    ``total``          every tensor the model holds: embedding, LM head when
                       untied, Linear weights and biases, norm weights (and
                       biases for layernorm), resize projections, and the
                       depth stabilisers' gates (rezero) or extra norms
                       (normformer).
    ``embedding``      the token embedding, plus the LM head when it is untied.
    ``non_embedding``  ``total - embedding``.
    ``matmul``         every Linear weight, *including* the LM head whether
                       tied or not: the weights that multiply every token.
    ``active``         (``mlp=moe``) the parameters one token uses: ``total``
                       less the experts it is not routed to, i.e. each layer
                       counts its router and top_k of its n_experts experts
                       (3·w_i·m_i each: up, gate, out; experts have no biases).
                       Equal to ``total`` for a dense model.
    ``matmul_active``  ``matmul`` with the same top_k-of-n_experts rule.
FLOPs per token, training (forward + backward)
    ``dense``      = 6 · N_matmul_active  (2 per multiply-add forward, 4 backward;
                   for MoE only the routed experts and the router do work).
    ``attention``  = 3 · Σ_i (2·n_ctx·d_i + 2·n_ctx·d_i), d_i = n_head_i ·
                   head_size_i: QKᵀ and A·V each take 2·n_ctx·d_i forward per
                   query token, and backward costs twice the forward.
                   n_ctx is the number of keys a query attends to, averaged
                   over the sequence: (seq_len + 1) / 2 for causal attention
                   (query t sees t keys), seq_len without a mask.  Softmax,
                   norms, RoPE and other elementwise work are not counted.
    ``total``      = dense + attention.
KV cache
    Σ_i 2 · n_head_i · head_size_i · bytes_per_value per token (K and V).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Callable, Sequence

from depthwidth.core.errors import bad
from depthwidth.model.spec import ModelSpec


# -- the parameter-count conventions (one home: docs/science.md §2 and §4) -------------------------
# exact: count_params / account below (every tensor of the built model; ``params`` total,
# ``params_non_embedding`` without the embedding and the untied head);
# 12·D·W²: the Depth-Delusion ansatz's own N (``n_12dw2``), and its paper's total (``n_12dw2_total``);
# vwt: the reference convention of Wu et al. (``vwt_params``; an MoE's active count ``vwt_active_params``).


def n_12dw2(depth, width):
    """N = 12·D·W² (attention 4W² + a GELU MLP at 4W, 8W², per layer; no embedding, norms or biases);
    broadcasts over numpy arrays."""
    return 12.0 * depth * width * width


def n_12dw2_total(depth, width, vocab):
    """The Depth-Delusion paper's total: 12·D·W² + 2·V·W (an untied token embedding and LM head of V
    rows); broadcasts over numpy arrays."""
    return n_12dw2(depth, width) + 2.0 * vocab * width


DENSE_TERMS = (16.0, 0.0, 4.0)  # (K, G, D): Σ K·w² + Σ G·w − 3(w_1 − h)w_1 − D·w_L(w_L − h)


def moe_terms(n_experts: int, expert_ratio: float) -> tuple[float, float, float]:
    """The reference convention's (K, G, D) for E experts of hidden r·w_i (see above)."""
    return 4.0 + 3.0 * n_experts * expert_ratio, float(n_experts), n_experts * expert_ratio


def vwt_params(widths: Sequence[float], h: float, vocab: int, terms=DENSE_TERMS, classes=None) -> float:
    """Parameters in the reference (vwt) convention of docs/science.md §2:
    2·V·h + Σ (K·w² + G·w) − 3·(w_1 − h)·w_1 [w_1 > h] − D·w_L·(w_L − h) [w_L > h].
    ``classes``: ``layer_classes(widths)`` (a spec's, cached), to sum one layer of each class
    where that gives the same float as the layer-by-layer sum (the dry run of 10,000 models of up
    to 401 layers had summed every layer): whole numbers (integer widths, K and G), all below 2**53,
    so that every partial sum is exact either way."""
    K, G, D = terms
    w1, wL = widths[0], widths[-1]
    layers = None
    if classes is not None and K >= 0 and G >= 0 and float(K).is_integer() and float(G).is_integer():
        ws = [(widths[i], n) for i, n in classes]
        if all(type(w) is int and w >= 0 for w, _ in ws):
            k, g = int(K), int(G)
            exact = sum(n * (k * w * w + g * w) for w, n in ws)
            layers = float(exact) if exact < 2**53 else None
    if layers is None:
        layers = sum(K * w * w + G * w for w in widths)
    p = 2 * vocab * h + layers
    if w1 > h:
        p -= 3 * (w1 - h) * w1
    if wL > h:
        p -= D * wL * (wL - h)
    return p


def vwt_active_params(total: float, widths: Sequence[float], n_experts: int, expert_ratio: float, top_k: int) -> float:
    """The reference convention's active count of an MoE (the paper's solve_hparams.compute_active_params):
    its ``total`` (``vwt_params``) less the unrouted experts' share of Σ 3·E·r·w_i², the waste terms
    left as they are."""
    idle = (1 - top_k / n_experts) * sum(3 * n_experts * expert_ratio * w * w for w in widths)
    return total - idle


def _count(spec: ModelSpec, mlp_hidden: Callable[[int], float], classes=None) -> dict:
    """The one formula behind ``count_params`` and ``total_params_for_widths``.

    Widths (and ``mlp_hidden``) may be floats, so shape matching can solve on
    a continuous width; with integer widths every term is an exact int.
    ``classes``: ((i, n), ...), layer i counted for n layers (``spec.layer_classes``); default
    every layer once, in order (the float sums of shape matching stay as they were).
    """
    V, h = spec.vocab_size, spec.embed_width
    per_norm = 2 if spec.norm == "layernorm" else 1  # weight (+ bias) per coordinate
    n_in = 2 if spec.mlp == "swiglu" else 1  # Linear(w->m) matrices: up (+ gate)
    b = 1 if spec.bias else 0

    moe = spec.mlp == "moe"
    layer_matmul = 0
    idle = 0  # MoE: expert weights a token is not routed to
    other = 0  # biases and norm weights
    for i, k in ((i, 1) for i in range(spec.depth)) if classes is None else classes:
        w = spec.widths[i]
        m = mlp_hidden(i)
        layer_matmul += k * (3 * w * w + w * w)  # fused q,k,v + attention output
        if moe:  # router + n_experts SwiGLU experts (up, gate, out), no biases
            layer_matmul += k * (spec.n_experts * w + spec.n_experts * 3 * w * m)
            idle += k * ((spec.n_experts - spec.top_k) * 3 * w * m)
            other += k * (b * (3 * w + w))  # attention biases only
        else:
            layer_matmul += k * (n_in * w * m + m * w)  # MLP in (and gate) + MLP out
            other += k * (b * (3 * w + w + n_in * m + w))  # the same Linears' biases
        other += k * (2 * per_norm * w)  # norm_1 and norm_2 on the active prefix
        if spec.stabiliser == "rezero":
            other += k * 2  # one learned gate per residual branch
        elif spec.stabiliser == "normformer":
            other += k * (per_norm * (w + m))  # post-attention norm, norm on the MLP hidden units
        if spec.resize == "proj" and spec.input_width(i) != w:
            layer_matmul += k * (spec.input_width(i) * w)  # learned resize into layer i
    if spec.resize == "proj" and spec.widths[-1] != h:
        layer_matmul += spec.widths[-1] * h  # learned resize back to the head's width
    other += per_norm * spec.final_norm_width

    embedding = V * h if spec.tied else 2 * V * h
    total = embedding + layer_matmul + other
    return {
        "total": total,
        "embedding": embedding,
        "non_embedding": total - embedding,
        "matmul": layer_matmul + V * h,  # the LM head multiplies every token, tied or not
        "active": total - idle,
        "matmul_active": layer_matmul + V * h - idle,
    }


def count_params(spec: ModelSpec) -> dict:
    """Exact parameter counts of the model built from ``spec`` (ints)."""
    return dict(_counted(spec))


@functools.lru_cache(maxsize=64)
def _counted(spec: ModelSpec) -> tuple:
    """count_params, once per spec (a dry run asks it three times a run: the token rule, the
    parameters, the FLOPs per token)."""
    spec.validate()
    return tuple(_count(spec, spec.mlp_hidden, spec.layer_classes()).items())


def total_params_for_widths(widths: Sequence[float], template: ModelSpec) -> float:
    """Total parameters of ``template`` with per-layer ``widths`` that may be
    fractional (for shape matching): MLP hidden = mlp_ratio · w, not rounded."""
    ws = tuple(float(w) for w in widths)
    if not ws or any(not w > 0 for w in ws):
        raise bad("widths", list(widths), "a non-empty list of positive numbers")
    spec = replace(template, widths=ws)
    if template.mlp == "moe":
        return float(_count(spec, lambda i: template.expert_hidden * ws[i] / template.embed_width)["total"])
    return float(_count(spec, lambda i: template.mlp_ratio * ws[i])["total"])


def _check_seq_len(seq_len) -> None:
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise bad("seq_len", seq_len, "an integer >= 1")


@functools.lru_cache(maxsize=64)
def _attention_width(spec: ModelSpec) -> int:
    """Σ_i d_i over the layers, one layer of each class (``spec.layer_classes``) counted n times."""
    return sum(n * spec.heads(i) * spec.head_size(i) for i, n in spec.layer_classes())


def flops_per_token(spec: ModelSpec, seq_len: int, causal: bool = True) -> dict:
    """Training FLOPs per token: {dense, attention, total} (see module docstring)."""
    _check_seq_len(seq_len)
    n_matmul = count_params(spec)["matmul_active"]
    n_ctx = (seq_len + 1) / 2 if causal else float(seq_len)
    dense = 6 * n_matmul
    attention = 3 * (4 * n_ctx * _attention_width(spec))  # Σ_i 4·n_ctx·d_i: every term a multiple of 1/2, exact
    return {"dense": dense, "attention": attention, "total": dense + attention}


def kv_bytes_per_token(spec: ModelSpec, bytes_per_value: int = 2) -> int:
    """Bytes of K and V cached per token over all layers (bf16 by default)."""
    spec.validate()
    if bytes_per_value <= 0:
        raise bad("bytes_per_value", bytes_per_value, "a positive number of bytes")
    return 2 * bytes_per_value * _attention_width(spec)


def account(spec: ModelSpec, seq_len: int) -> dict:
    """Every figure above, flat, for configs, summaries and reports."""
    p = count_params(spec)
    f = flops_per_token(spec, seq_len)
    return {
        "params": p["total"],
        "params_embedding": p["embedding"],
        "params_non_embedding": p["non_embedding"],
        "params_matmul": p["matmul"],
        "params_active": p["active"],
        "flops_per_token": f["total"],
        "flops_dense_per_token": f["dense"],
        "flops_attention_per_token": f["attention"],
        "kv_bytes_per_token": kv_bytes_per_token(spec),
        "seq_len": seq_len,
        "depth": spec.depth,
        "mean_width": sum(spec.widths) / spec.depth,
        "widths": list(spec.widths),
    }


def param_shapes(spec: ModelSpec) -> list[tuple[str, str, tuple[int, ...]]]:
    """Every parameter the model built from ``spec`` holds, in ``named_parameters()``
    order: (FSDP unit: ``root`` or ``blocks.i``, name, shape).  A tied LM head is the
    embedding (listed once).  A test checks this against the built model."""
    spec.validate()
    V, h = spec.vocab_size, spec.embed_width
    b = spec.bias

    def norm(prefix: str, width: int) -> list:
        return [(prefix + ".weight", (width,))] + ([(prefix + ".bias", (width,))] if spec.norm == "layernorm" else [])

    def linear(prefix: str, n_in: int, n_out: int, bias: bool) -> list:
        return [(prefix + ".weight", (n_out, n_in))] + ([(prefix + ".bias", (n_out,))] if bias else [])

    out = [("root", "wte.weight", (V, h))]
    for i, w in enumerate(spec.widths):
        m, in_w, st = spec.mlp_hidden(i), spec.input_width(i), spec.stabiliser
        ps = [("gate_attn", ()), ("gate_mlp", ())] if st == "rezero" else []  # own parameters come first
        ps += linear("proj_in", in_w, w, False) if spec.resize == "proj" and in_w != w else []
        ps += norm("norm_1", w) + linear("attn.c_attn", w, 3 * w, b) + linear("attn.c_proj", w, w, b)
        ps += norm("norm_2", w)
        if spec.mlp == "moe":  # MoE's own stacked expert weights come before its router submodule
            E = spec.n_experts
            ps += [
                ("mlp.w_fc", (E, m, w)),
                ("mlp.w_gate", (E, m, w)),
                ("mlp.w_proj", (E, w, m)),
                ("mlp.router.weight", (E, w)),
            ]
        else:
            ps += linear("mlp.c_fc", w, m, b)
            if spec.mlp == "swiglu":
                ps += linear("mlp.c_gate", w, m, b)
            ps += linear("mlp.c_proj", m, w, b)
        if st == "normformer":
            ps += norm("mlp.mid_norm", m) + norm("attn_out_norm", w)
        out += [(f"blocks.{i}", f"blocks.{i}.{n}", s) for n, s in ps]
    if spec.resize == "proj" and spec.widths[-1] != h:
        out += [("root", n, s) for n, s in linear("proj_out", spec.widths[-1], h, False)]
    out += [("root", n, s) for n, s in norm("norm_f", spec.final_norm_width)]
    if not spec.tied:
        out.append(("root", "lm_head.weight", (V, h)))
    return out
