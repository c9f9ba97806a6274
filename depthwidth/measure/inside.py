"""One model + a fixed held-out token set -> the per-layer analysis (analysis.json's body).

The evaluation set (``eval_set``) is ``ceil(tokens / seq_len)`` windows of the
run's ``seq_len`` at evenly spaced offsets of the data's validation split
(``TokenSource.val_batches``): it depends on the data and seq_len only, never
on a run or its seed, so every run of a sweep is measured on the same tokens
(``eval.sha`` in the document lets a reader check).  A validation split too
small for that many windows without overlap gives as many as it holds
(``eval_windows``): ``eval.tokens`` counts distinct tokens, never more than the
split has, and may be fewer than asked.  Default size
``DEFAULT_TOKENS``; the entropy's matrix uses at most ``ENTROPY_TOKENS`` of
them, evenly spaced (an eigendecomposition of a min(n, d)² Gram matrix).

Per layer i (1 = bottom), on the stream after layer i:

    entropy_prefix   H over the layer's own w_i coordinates (what it reads and writes)
    entropy_full     H over the whole stream (R = max(max_j w_j, h) wide; = prefix for proj)
    mlp_density, mlp_dead, mlp_balance   of the layer's MLP hidden units (stats.density)
    mlp_threshold    the layer's ε: a SwiGLU unit is active on a token when |a_j| >= ε (None: GELU, a > 0)
    lens_ce, lens_entropy, lens_kl_final, lens_kl_prev, lens_target_prob_mean   (stats.lens_sums)
    lens_target_prob = exp(−lens_ce), the geometric mean of p(target) over the tokens

ε is the layer's CETT threshold (stats.cett_threshold, target ``CETT_TARGET``),
calibrated in one extra forward pass on the first ``CALIBRATION_TOKENS`` of
the evaluation tokens (the first whole windows, or the first tokens of one
window when seq_len is longer), one layer at a time so only one layer's
activations are held; it then applies to every evaluation token.  The
activation a is the MLP's hidden vector — the input of c_proj, or of
NormFormer's mid-norm — and W the matrix through which a reaches the MLP's
output (``unit_out``): c_proj's weight, for a mid-norm composed with the
norm's gain (and, for LayerNorm, its centring).  With the mid-norm the
contribution of unit j is exact up to the token's own normalising scale
1/rms(a) (or 1/σ(a)), one positive number per token that cancels in CETT's
ratio; so CETT is the dropped units' share of the output at the token's own
normalisation (constant terms — the norm's and c_proj's biases — are no
unit's and are left out).  MoE: each expert's hidden units with its own
w_proj[e], one ε per layer pooled over the layer's (token, expert) slots.
``threshold=`` a number: instead, one fixed ε for every layer (|a| >= it).

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
    CETT_TARGET,
    DEAD_BELOW,
    active,
    cett_threshold,
    density,
    lens_sums,
    matrix_entropy,
)

DEFAULT_TOKENS = 8192  # evaluation tokens per run (whole windows of the run's seq_len)
ENTROPY_TOKENS = 2048  # at most this many of them enter each entropy matrix, evenly spaced
BATCH_TOKENS = 2048  # tokens per forward pass: bounds the (tokens × V) logits held per layer
CALIBRATION_TOKENS = 2048  # the first this many evaluation tokens calibrate each layer's CETT threshold
ENTROPY_PROBE_TOKENS = 512  # probe.entropy_every: eval_set(source, seq_len, 512), one forward
LENS_KEYS = ("ce", "target_prob_mean", "entropy", "kl_final", "kl_prev")  # summed over tokens


def eval_windows(source, seq_len: int, tokens: int = DEFAULT_TOKENS) -> int:
    """How many windows ``eval_set`` takes: ceil(tokens / seq_len), but no more than the validation
    split holds without overlap ((n − 1) // seq_len: n tokens give that many disjoint windows of
    seq_len + 1 tokens less one shared at each seam), so every evaluation token is a distinct one."""
    want = max(1, math.ceil(int(tokens) / int(seq_len)))
    return max(1, min(want, (int(source.n_tokens("val")) - 1) // int(seq_len)))


def eval_set(source, seq_len: int, tokens: int = DEFAULT_TOKENS):
    """(x, y) int64 arrays (sequences, seq_len): the fixed held-out evaluation set, ``eval_windows``
    windows; y's positions are distinct tokens of the split, so x.size never exceeds its size."""
    return source.val_batches(eval_windows(source, seq_len, tokens), int(seq_len), 1)[0]


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


def unit_out(mlp, expert: int | None = None):
    """W (w, m): the matrix through which the hidden activations a (``_unit_inputs``' input, or
    expert ``expert``'s) reach the MLP's output, up to constant terms and, with a mid-norm, the
    token's normalising scale: c_proj · diag(gain) (LayerNorm: · (I − 11ᵀ/m), its centring)."""
    import torch

    if expert is not None:
        return mlp.w_proj[expert]
    W, norm = mlp.c_proj.weight, mlp.mid_norm
    if norm is None:
        return W
    if getattr(norm, "weight", None) is not None:
        W = W * norm.weight
    return W - W.mean(dim=1, keepdim=True) if isinstance(norm, torch.nn.LayerNorm) else W


def _on_units(model, fn, done=None):
    """Until the returned function is called, every forward calls ``fn(i, e, a)`` with layer i's MLP
    hidden activations a (tokens, m) (e: the expert, None for a dense MLP) and, for MoE layers,
    ``done(i)`` once layer i's experts have all run."""
    handles = []
    for i, b in enumerate(model.blocks):
        if model.spec.mlp == "moe":
            b.mlp.on_hidden = lambda e, a, i=i: fn(i, e, a)
            if done is not None:
                handles.append(b.mlp.register_forward_hook(lambda *_, i=i: done(i)))
        else:
            handles.append(
                _unit_inputs(b).register_forward_pre_hook(
                    lambda _mod, inp, i=i: fn(i, None, inp[0].reshape(-1, inp[0].size(-1)))
                )
            )

    def remove():
        for hd in handles:
            hd.remove()
        for b in model.blocks if model.spec.mlp == "moe" else ():
            b.mlp.on_hidden = None

    return remove


def calibrate(model, idx, target: float = CETT_TARGET) -> list:
    """Each layer's CETT threshold ε on token ids ``idx`` (one forward pass; None for GELU layers).
    A layer's activations are held only until its ε is found (MoE: until its last expert ran)."""
    import torch

    eps, held = [None] * model.spec.depth, {}
    if model.spec.mlp == "gelu":
        return eps

    def fn(i, e, a):
        mlp = model.blocks[i].mlp
        if e is None:
            eps[i] = cett_threshold([(a, unit_out(mlp))], target)
        else:
            held.setdefault(i, []).append((a, unit_out(mlp, e)))

    def done(i):
        eps[i] = cett_threshold(held.pop(i), target)

    remove = _on_units(model, fn, done)
    try:
        with torch.no_grad():
            model(idx)
    finally:
        remove()
    return eps


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


def analyse(
    model,
    x,
    y,
    *,
    centre: bool = False,
    threshold: float | None = None,
    cett_target: float = CETT_TARGET,
    calibration_tokens: int = CALIBRATION_TOKENS,
    entropy_tokens: int = ENTROPY_TOKENS,
    batch_tokens: int = BATCH_TOKENS,
) -> dict:
    """Every measure of every layer of ``model`` on tokens ``x`` -> targets ``y`` (numpy or tensors).
    ``threshold``: None, each SwiGLU layer's CETT threshold at ``cett_target`` (calibrated on the
    first ``calibration_tokens`` of x); a number, that fixed ε for every layer."""
    import torch

    spec, L = model.spec, model.spec.depth
    dev = next(model.parameters()).device
    X, Y = torch.as_tensor(x, device=dev), torch.as_tensor(y, device=dev)
    n_seq, T = X.shape
    N = n_seq * T
    k = min(int(entropy_tokens), N)
    pick = (torch.arange(k, device=dev) * (N - 1)) // max(k - 1, 1)  # evenly spaced token indices
    moe, C = spec.mlp == "moe", int(calibration_tokens)
    Xc = X[: max(1, C // T), : min(T, C)]  # the first <= C evaluation tokens
    rule = "gelu>0" if spec.mlp == "gelu" else "cett" if threshold is None else "fixed"
    units = [spec.mlp_hidden(i) * (spec.n_experts if moe else 1) for i in range(L)]
    counts = [torch.zeros(u, dtype=torch.int64, device=dev) for u in units]
    # MoE: a unit of expert e is measured on the tokens routed to e (its own denominator)
    seen = [torch.zeros(u, dtype=torch.int64, device=dev) for u in units] if moe else None

    def count(i, e, a):
        on = active(a, spec.mlp, eps[i]).sum(0)
        if e is None:
            counts[i].add_(on)
        else:
            m = spec.mlp_hidden(i)
            counts[i][e * m : (e + 1) * m] += on
            seen[i][e * m : (e + 1) * m] += a.size(0)

    rows = [[] for _ in range(L)]  # the entropy's tokens, per layer
    sums = [dict.fromkeys(LENS_KEYS, 0.0) for _ in range(L + 1)]  # index 0: the embedding stream
    loss_sum = 0.0
    was = model.training
    model.eval()
    remove = None
    try:
        eps = (
            calibrate(model, Xc, cett_target)
            if rule == "cett"
            else [None if rule == "gelu>0" else float(threshold)] * L
        )
        remove = _on_units(model, count)
        with torch.no_grad():
            per = max(1, int(batch_tokens) // T)
            for b0 in range(0, n_seq, per):
                xb, yb = X[b0 : b0 + per], Y[b0 : b0 + per]
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
        if remove is not None:
            remove()
        model.train(was)
    layers = []
    for i in range(L):
        Z, w = torch.cat(rows[i]), spec.widths[i]
        d = density(counts[i], seen[i].clamp(min=1) if moe else N)
        layers.append(
            {
                "layer": i + 1,
                "width": w,
                "entropy_prefix": matrix_entropy(Z[:, :w], centre),
                "entropy_full": matrix_entropy(Z, centre),
                "mlp_density": d["density"],
                "mlp_dead": d["dead"],
                "mlp_balance": d["balance"],
                "mlp_threshold": eps[i],
                **_lens(sums[i + 1], N),
            }
        )
    emb = _lens(sums[0], N)
    emb.pop("lens_kl_prev")
    xs = X.to("cpu").numpy()
    return {
        "eval": {
            "sequences": int(n_seq),
            "seq_len": int(T),
            "tokens": int(N),
            "entropy_tokens": int(k),
            "sha": fingerprint(xs.astype("int64").tobytes(), Y.to("cpu").numpy().astype("int64").tobytes()),
        },
        "options": {
            "centre": bool(centre),
            "mlp_rule": rule,
            "cett_target": float(cett_target) if rule == "cett" else None,
            "calibration_tokens": int(Xc.numel()) if rule == "cett" else None,
            "swiglu_threshold": float(threshold) if rule == "fixed" else None,
            "dead_below": DEAD_BELOW,
            "mlp": spec.mlp,
            "resize": spec.resize,
        },
        "eval_loss": loss_sum / N,
        "embedding_lens": emb,
        "layers": layers,
    }


def _lens(s: dict, N: int) -> dict:
    """Per-token means of one layer's lens sums; p(target) = exp(−CE), the geometric mean."""
    out = {f"lens_{key}": s[key] / N for key in LENS_KEYS}
    return {"lens_ce": out["lens_ce"], "lens_target_prob": math.exp(-out["lens_ce"]), **out}
