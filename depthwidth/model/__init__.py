"""The model and its arithmetic: the torch-free spec (spec.py), width shapes
(shapes.py), a ``model`` config group -> spec (resolve.py), parameter / FLOP /
KV accounting (accounting.py), shape figures (figures.py) and the
variable-width transformer itself (gpt.py, the only module importing torch)."""
