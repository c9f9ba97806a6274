"""The papers' published numbers, in one place (docs/science.md §1-2): what fits are set beside,
what the prior is anchored on, what reports and the README quote.  Nothing here is ours: every
number is as "The Depth Delusion" (Fahim & Karim) or "Variable-Width Transformers" (Wu et al.)
publish it.  No imports beyond the standard library."""

from __future__ import annotations

# "The Depth Delusion": training loss and parameters of the configurations it publishes, by
# (depth, width); small models at 6.4B tokens, the 1B-7B pairs at 20 tokens per parameter up to 140B
DD_LOSSES = {
    (2, 512): (3.945, 58e6),
    (8, 512): (3.543, 77e6),
    (16, 512): (3.435, 102.1e6),
    (24, 512): (3.468, 127.3e6),
    (32, 512): (3.441, 152.4e6),
    (16, 256): (3.929, None),
    (16, 1536): (3.049, None),
    (24, 1792): (2.821, None),
    (80, 1024): (2.978, None),
    (40, 2432): (2.519, None),
    (72, 1792): (2.681, None),
    (32, 4096): (2.298, 6.86e9),
    (64, 2816): (2.417, 6.38e9),
}
DD_KAPPA = 2.43  # D_crit ≈ kappa·ln W
DD_POWER_C = 0.981  # the power form D_crit ≈ c·W^p: its scale (p = DD_TAU_EXPONENT)
DD_VOCAB = 50257  # the paper's vocabulary (inferred, docs/science.md §1): its N_total (model/accounting.py)
DD_TAU_EXPONENT = 0.44  # gradient persistence tau(W) ∝ W^0.44 ...
DD_TAU_R2 = 0.98  # ... with R² 0.98
DD_FIT = {"r2": 0.922, "rmse": 0.113, "alpha": 0.22, "alpha_ci": (-0.21, 0.65)}  # their law's fit, nats
DD_DCRIT = {"GPT-3": 22.9, "PaLM-540B": 23.9, "Llama-3-70B": 21.9}  # kappa·ln W extrapolated

# "Variable-Width Transformers": the × shape reaches the 2B uniform model's loss with these fractions
VWT_MATCH = {
    "shape": "x",
    "baseline": "uniform 2B (h 1600, L 40)",
    "loss": 2.751,
    "flops_fraction": 0.778,
    "mean_width_ratio": 0.851,
    "kv_ratio": 0.85,
}
