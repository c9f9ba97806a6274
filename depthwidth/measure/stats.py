"""The three measures as tensor maths (float64 where it decides the answer).

Normalised matrix entropy (Skean et al., "Layer by Layer"; Wu et al. §analyses):
Z (n tokens × d dims) -> the smaller Gram matrix K (ZZᵀ if n <= d, else ZᵀZ;
both have the same non-zero eigenvalues σ_j²), λ clamped >= 0,
p_j = λ_j / tr K,  H = −Σ p_j log p_j / log min(n, d)  in [0, 1]:
1 when every direction carries the same energy, 0 for a rank-1 stream.

MLP activation density ("Sparsing Law", Luo et al. 2024): per hidden unit,
the fraction of tokens on which it is active.  GELU: output > 0.  SwiGLU
(and each SwiGLU expert of a MoE layer), whose outputs are never exactly 0:
|a_j| >= ε, with ε the layer's CETT threshold.  For a layer's hidden
activations a (tokens × m) and the matrix W (w × m) through which they reach
the layer's output y = W a, dropping the units with |a_j| < ε loses

    CETT(ε) = mean over tokens of ‖W (a ⊙ 1[|a| < ε])‖₂ / ‖W a‖₂

(the arithmetic mean of the per-token ratio over the tokens whose W a is
non-zero; MoE: over the (token, expert) slots, each with its expert's own W).
ε is the largest threshold with CETT(ε) <= the target (``CETT_TARGET`` =
0.2), found by bisection over the calibration activations' own |a| values
(``cett_threshold``), so it is one of them and |a_j| >= ε is decided without
rounding.  Rescaling a by s and W by 1/s leaves the model and ε/s, and so
every active/inactive decision, unchanged: the rule is scale-free, unlike a
fixed |a| > 1e-3.  A unit is dead when active on fewer than ``DEAD_BELOW`` =
0.1% of the tokens.

Logit lens (tuned-lens project's evaluation): per layer, from that layer's
logits, the cross-entropy to the targets, the target-token probability
p(target) = exp(−CE) (the geometric mean over tokens; callers derive it from
the CE), the arithmetic mean of p(target) (>= the geometric one, Jensen), the
mean entropy of the predicted distribution, KL(final ‖ layer) and KL to the
layer below.  Sums are returned so callers can add them over batches.
"""

from __future__ import annotations

import math

DEAD_BELOW = 1e-3  # a unit active on < 0.1% of tokens is dead
CETT_TARGET = 0.2  # dropping a layer's inactive units loses at most 20% of its output's norm (mean over tokens)


def matrix_entropy(Z, centre: bool = False) -> float:
    """H of the rows of Z (tokens × dims; leading dims are flattened into tokens).
    ``centre``: subtract the mean token first (then the mean direction carries no energy)."""
    import torch

    Z = Z.reshape(-1, Z.size(-1)).to(torch.float64)
    if centre:
        Z = Z - Z.mean(dim=0, keepdim=True)
    n, d = Z.shape
    if min(n, d) < 2:
        return 0.0  # one direction: no spread to measure (log min(n, d) = 0)
    K = Z @ Z.T if n <= d else Z.T @ Z
    lam = torch.linalg.eigvalsh(K).clamp_min(0.0)
    tr = lam.sum()
    if not tr > 0:
        return 0.0
    p = lam[lam > 0] / tr
    return float(-(p * p.log()).sum() / math.log(min(n, d)))


def active(a, kind: str, threshold: float | None = None):
    """Boolean mask of active hidden units in activations ``a`` (…, m): GELU a > 0,
    otherwise |a| >= ``threshold`` (the layer's ε)."""
    return a > 0 if kind == "gelu" else a.abs() >= threshold


def _cett_rows(parts):
    """[(a (n, m) float64, |a|, Wᵀ (m, w) float64, ‖W a‖ (n,))] over the rows with non-zero output."""
    import torch

    out = []
    for a, W in parts:
        a = a.reshape(-1, a.size(-1)).to(torch.float64)
        Wt = W.to(device=a.device, dtype=torch.float64).T
        den = torch.linalg.vector_norm(a @ Wt, dim=-1)
        keep = den > 0
        out.append((a[keep], a[keep].abs(), Wt, den[keep]))
    return out


def _cett_of(rows, eps: float) -> float:
    import torch

    n = sum(a.size(0) for a, _, _, _ in rows)
    if n == 0:
        return 0.0  # the layer writes nothing on these tokens: dropping any unit loses nothing
    lost = 0.0
    for a, mag, Wt, den in rows:
        if a.numel():
            low = torch.where(mag < eps, a, 0.0)
            lost += float((torch.linalg.vector_norm(low @ Wt, dim=-1) / den).sum())
    return lost / n


def cett(parts, eps: float) -> float:
    """CETT(ε) of one layer.  ``parts``: [(a (…, m), W (w, m)), ...], the hidden activations
    and the matrix through which they reach the output (one pair; MoE: one per expert, pooled)."""
    return _cett_of(_cett_rows(parts), eps)


def cett_threshold(parts, target: float = CETT_TARGET) -> float:
    """The layer's ε: the largest of the calibration activations' |a| values with CETT(ε) <= ``target``,
    by bisection (CETT is non-decreasing in ε but for cancellation between units; the bisection
    stops at ε with CETT(ε) <= target < CETT(the next larger value)).  When even dropping every unit
    stays within the target (the layer's output is 0 on every calibration token) ε is just above the
    largest |a|."""
    import torch

    if not 0 < float(target) < 1:
        raise ValueError(f"CETT target {target!r}: a number in (0, 1)")
    rows = _cett_rows(parts)
    vals = torch.cat([a.detach().abs().reshape(-1) for a, _ in parts]).unique()  # sorted, a's own dtype
    if vals.numel() == 0:
        return 0.0  # no activations to calibrate on
    above = torch.nextafter(vals[-1], torch.tensor(math.inf, dtype=vals.dtype, device=vals.device))
    cand = lambda k: float(vals[k] if k < vals.numel() else above)  # noqa: E731
    lo, hi = 0, vals.numel()  # CETT(min |a|) = 0: nothing lies below it; index numel: every unit dropped
    if _cett_of(rows, cand(hi)) <= target:
        return cand(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _cett_of(rows, cand(mid)) <= target:
            lo = mid
        else:
            hi = mid
    return cand(lo)


def density(counts, n_tokens: int, dead_below: float = DEAD_BELOW) -> dict:
    """Summary of per-unit active-token counts (m,) over ``n_tokens`` tokens (or per-unit
    token counts (m,), e.g. the tokens routed to each unit's expert in a MoE layer):
    mean density, fraction of dead units, and the load balance — the normalised
    entropy of the units' share of all activations (1: every unit fires equally
    often; 0: one unit does all the work)."""
    import torch

    f = counts.to(torch.float64) / n_tokens
    m = f.numel()
    total = f.sum()
    if m < 2 or not total > 0:
        balance = 1.0 if m == 1 and total > 0 else 0.0
    else:
        q = f[f > 0] / total
        balance = float(-(q * q.log()).sum() / math.log(m))
    return {"density": float(f.mean()), "dead": float((f < dead_below).to(torch.float64).mean()), "balance": balance}


def lens_sums(logits, targets, final_logp, prev_logp):
    """Per-token sums for one layer's lens logits (N, V) against ``targets`` (N,).
    ``final_logp``/``prev_logp``: log-probabilities of the final / previous layer's
    lens (None: not available).  Returns (sums dict, this layer's log-probs); the
    target probability exp(−CE) is the caller's, from the summed ``ce``."""
    import torch

    logp = torch.log_softmax(logits.to(torch.float32), dim=-1)
    p = logp.exp()
    lp_t = logp.gather(-1, targets[:, None]).squeeze(-1)
    s = {
        "ce": float(-lp_t.to(torch.float64).sum()),
        "target_prob_mean": float(lp_t.exp().to(torch.float64).sum()),
        "entropy": float(-(p * logp).sum()),
    }
    if final_logp is not None:
        pf = final_logp.exp()
        s["kl_final"] = float((pf * (final_logp - logp)).sum())
    if prev_logp is not None:
        s["kl_prev"] = float((p * (logp - prev_logp)).sum())
    return s, logp
