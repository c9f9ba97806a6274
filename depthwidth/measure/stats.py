"""The three measures as tensor maths (float64 where it decides the answer).

Normalised matrix entropy (Skean et al., "Layer by Layer"; Wu et al. §analyses):
Z (n tokens × d dims) -> the smaller Gram matrix K (ZZᵀ if n <= d, else ZᵀZ;
both have the same non-zero eigenvalues σ_j²), λ clamped >= 0,
p_j = λ_j / tr K,  H = −Σ p_j log p_j / log min(n, d)  in [0, 1]:
1 when every direction carries the same energy, 0 for a rank-1 stream.

MLP activation density ("Sparsing Law"): per hidden unit, the fraction of
tokens on which it is active (GELU: output > 0; SwiGLU: |output| > a stated
threshold, since its outputs are never exactly 0).  A unit is dead when
active on fewer than ``DEAD_BELOW`` = 0.1% of the tokens.

Logit lens (tuned-lens project's evaluation): per layer, from that layer's
logits, the cross-entropy to the targets, the mean target-token probability,
the mean entropy of the predicted distribution, KL(final ‖ layer) and KL to
the layer below.  Sums are returned so callers can add them over batches.
"""

from __future__ import annotations

import math

DEAD_BELOW = 1e-3  # a unit active on < 0.1% of tokens is dead
SWIGLU_THRESHOLD = 1e-3  # |silu(g)·u| above this counts as active (SwiGLU is never exactly 0)


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


def active(a, kind: str, threshold: float = SWIGLU_THRESHOLD):
    """Boolean mask of active hidden units in activations ``a`` (…, m)."""
    return a > 0 if kind == "gelu" else a.abs() > threshold


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
    return {"density": float(f.mean()), "dead": float((f < dead_below).to(torch.float64).mean()),
            "balance": balance}


def lens_sums(logits, targets, final_logp, prev_logp):
    """Per-token sums for one layer's lens logits (N, V) against ``targets`` (N,).
    ``final_logp``/``prev_logp``: log-probabilities of the final / previous layer's
    lens (None: not available).  Returns (sums dict, this layer's log-probs)."""
    import torch

    logp = torch.log_softmax(logits.to(torch.float32), dim=-1)
    p = logp.exp()
    lp_t = logp.gather(-1, targets[:, None]).squeeze(-1)
    s = {"ce": float(-lp_t.sum()), "target_prob": float(lp_t.exp().sum()),
         "entropy": float(-(p * logp).sum())}
    if final_logp is not None:
        pf = final_logp.exp()
        s["kl_final"] = float((pf * (final_logp - logp)).sum())
    if prev_logp is not None:
        s["kl_prev"] = float((p * (logp - prev_logp)).sum())
    return s, logp
