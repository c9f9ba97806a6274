"""What happens inside a trained model, layer by layer (docs/science.md §2 "Analyses").

Modules: ``stats`` (the three measures as tensor maths: normalised matrix
entropy, MLP activation density, logit-lens statistics), ``inside`` (one
model + a fixed held-out token set -> the per-layer analysis document),
``doc`` (the analysis.json format, torch-free: what ``dw report`` reads).

This stage sits below ``train`` (the end-of-training analysis and the
``probe.entropy_every`` probe run from there) and beside ``track``; it reads
the model (``model/gpt.py``) and token data (``data/``) only.  torch is
imported inside functions, never at import time.
"""
