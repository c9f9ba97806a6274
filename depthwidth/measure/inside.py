"""One model + a fixed held-out token set -> the per-layer analysis (analysis.json's body).

The evaluation set (``eval_set``) is ``ceil(tokens / seq_len)`` windows of the
run's ``seq_len`` at evenly spaced offsets of the data's validation split
(``TokenSource.val_batches``): it depends on the data and seq_len only, never
on a run or its seed, so every run of a sweep is measured on the same tokens
(``eval.sha`` in the document lets a reader check).  Default size
``DEFAULT_TOKENS``; the entropy's matrix uses at most ``ENTROPY_TOKENS`` of
them, evenly spaced (an eigendecomposition of a min(n, d)² Gram matrix).

Per layer i (1 = bottom), on the stream after layer i:

    entropy_prefix   H over the layer's own w_i coordinates (what it reads and writes)
    entropy_full     H over the whole stream (R = max(max_j w_j, h) wide; = prefix for proj)
    mlp_density, mlp_dead, mlp_balance   of the layer's MLP hidden units (stats.density)
    lens_ce, lens_target_prob, lens_entropy, lens_kl_final, lens_kl_prev   (stats.lens_sums)

The logit lens reads layer i's stream as the head would see it if layers
i+1..L added nothing: through the width changes those layers make (carry:
none, the stream is read as it is, exactly as ``readout`` reads the last one;
zero: the zeroing beyond each later layer's input width; proj: the later
layers' input projections), then ``readout`` (final norm, truncation to h, LM
head).  At the last layer that is ``readout`` itself, so the lens reproduces
the model's own logits.  ``lens_kl_prev`` of layer 1 compares it with the lens
of the embedding stream.  Entropy is not centred unless ``centre=True``.
"""

from __future__ import annotations

import math

from depthwidth.core.provenance import fingerprint
from depthwidth.measure.stats import (
    DEAD_BELOW,
    SWIGLU_THRESHOLD,
    active,
    density,
    lens_sums,
    matrix_entropy,
)

DEFAULT_TOKENS = 8192  # evaluation tokens per run (whole windows of the run's seq_len)
ENTROPY_TOKENS = 2048  # at most this many of them enter each entropy matrix, evenly spaced
BATCH_TOKENS = 2048  # tokens per forward pass: bounds the (tokens × V) logits held per layer
ENTROPY_PROBE_TOKENS = 512  # probe.entropy_every: eval_set(source, seq_len, 512), one forward
LENS_KEYS = ("ce", "target_prob", "entropy", "kl_final", "kl_prev")


def eval_set(source, seq_len: int, tokens: int = DEFAULT_TOKENS):
    """(x, y) int64 arrays (sequences, seq_len): the fixed held-out evaluation set."""
    n = max(1, math.ceil(int(tokens) / int(seq_len)))
    return source.val_batches(n, int(seq_len), 1)[0]


def lens_logits(model, x, layer: int):
    """Logits of the stream ``x`` after layer ``layer`` (0: the embedding, L: the last)."""
    import torch.nn.functional as F

    s = model.spec
    for j in range(layer, s.depth):  # the width changes of layers j+1 = layer+1 .. L, without their blocks
        if s.resize == "zero":
            in_w, R = s.input_width(j), x.size(-1)
            if in_w < R:
                x = F.pad(x[..., :in_w], (0, R - in_w))
        if model.blocks[j].proj_in is not None:
            x = model.blocks[j].proj_in(x)
    return model.readout(x)


def _unit_inputs(block):
    """The module whose input is the MLP's activation (before NormFormer's mid-norm)."""
    return block.mlp.mid_norm if block.mlp.mid_norm is not None else block.mlp.c_proj


def entropy_profile(model, idx, centre: bool = False) -> list[float]:
    """H over each layer's active prefix on one batch of token ids: the cheap probe of training."""
    import torch

    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            _, _, hidden = model(idx, return_hidden=True)
        return [matrix_entropy(h[..., :w], centre) for h, w in zip(hidden, model.spec.widths)]
    finally:
        model.train(was)


def analyse(model, x, y, *, centre: bool = False, threshold: float = SWIGLU_THRESHOLD,
            entropy_tokens: int = ENTROPY_TOKENS, batch_tokens: int = BATCH_TOKENS) -> dict:
    """Every measure of every layer of ``model`` on tokens ``x`` -> targets ``y`` (numpy or tensors)."""
    import torch

    spec, L = model.spec, model.spec.depth
    dev = next(model.parameters()).device
    X, Y = torch.as_tensor(x, device=dev), torch.as_tensor(y, device=dev)
    n_seq, T = X.shape
    N = n_seq * T
    k = min(int(entropy_tokens), N)
    pick = (torch.arange(k, device=dev) * (N - 1)) // max(k - 1, 1)  # evenly spaced token indices
    moe = spec.mlp == "moe"
    units = [spec.mlp_hidden(i) * (spec.n_experts if moe else 1) for i in range(L)]
    counts = [torch.zeros(u, dtype=torch.int64, device=dev) for u in units]
    # MoE: a unit of expert e is measured on the tokens routed to e (its own denominator)
    seen = [torch.zeros(u, dtype=torch.int64, device=dev) for u in units] if moe else None

    def count(i):
        def hook(_mod, inp):
            a = inp[0]
            counts[i].add_(active(a, spec.mlp, threshold).reshape(-1, a.size(-1)).sum(0))
        return hook

    def count_expert(i, m):
        def hook(e, a):
            counts[i][e * m:(e + 1) * m] += active(a, "swiglu", threshold).sum(0)
            seen[i][e * m:(e + 1) * m] += a.size(0)
        return hook

    handles = []
    for i, b in enumerate(model.blocks):
        if moe:
            b.mlp.on_hidden = count_expert(i, spec.mlp_hidden(i))
        else:
            handles.append(_unit_inputs(b).register_forward_pre_hook(count(i)))
    rows = [[] for _ in range(L)]  # the entropy's tokens, per layer
    sums = [dict.fromkeys(LENS_KEYS, 0.0) for _ in range(L + 1)]  # index 0: the embedding stream
    loss_sum = 0.0
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            per = max(1, int(batch_tokens) // T)
            for b0 in range(0, n_seq, per):
                xb, yb = X[b0:b0 + per], Y[b0:b0 + per]
                _, loss, hidden = model(xb, yb, return_hidden=True)
                loss_sum += float(loss) * xb.numel()
                lo = b0 * T
                sel = pick[(pick >= lo) & (pick < lo + xb.numel())] - lo
                for i, h in enumerate(hidden):
                    rows[i].append(h.reshape(-1, h.size(-1))[sel].to("cpu", torch.float64))
                t = yb.reshape(-1)
                streams = [model.embed(xb), *hidden]
                flat = lambda j: lens_logits(model, streams[j], j).reshape(t.numel(), -1)  # noqa: E731
                top = flat(L)
                _, final = lens_sums(top, t, None, None)
                prev = None
                for j in range(L + 1):
                    s, prev = lens_sums(flat(j) if j < L else top, t, final, prev)
                    for key, v in s.items():
                        sums[j][key] += v
    finally:
        for hd in handles:
            hd.remove()
        for blk in model.blocks if moe else ():
            blk.mlp.on_hidden = None
        model.train(was)
    layers = []
    for i in range(L):
        Z, w = torch.cat(rows[i]), spec.widths[i]
        d = density(counts[i], seen[i].clamp(min=1) if moe else N)
        layers.append({"layer": i + 1, "width": w,
                       "entropy_prefix": matrix_entropy(Z[:, :w], centre), "entropy_full": matrix_entropy(Z, centre),
                       "mlp_density": d["density"], "mlp_dead": d["dead"], "mlp_balance": d["balance"],
                       **{f"lens_{key}": sums[i + 1][key] / N for key in LENS_KEYS}})
    emb = {f"lens_{key}": sums[0][key] / N for key in LENS_KEYS if key != "kl_prev"}
    xs = X.to("cpu").numpy()
    return {
        "eval": {"sequences": int(n_seq), "seq_len": int(T), "tokens": int(N), "entropy_tokens": int(k),
                 "sha": fingerprint(xs.astype("int64").tobytes(), Y.to("cpu").numpy().astype("int64").tobytes())},
        "options": {"centre": bool(centre), "swiglu_threshold": float(threshold), "dead_below": DEAD_BELOW,
                    "mlp": spec.mlp, "resize": spec.resize},
        "eval_loss": loss_sum / N,
        "embedding_lens": emb,
        "layers": layers,
    }
