"""Per-layer diagnostics of a training run.

Gradient persistence (Depth Delusion §1): the gradient norm of every layer —
whole block, attention and MLP separately — right after backward (before
clipping).  All per-parameter norms come from one ``torch._foreach_norm``
call, are summed into per-layer groups on the device with ``index_add_``, and
cross to the host in a single transfer, only on probe steps.

Router load (``mlp=moe``): on the same steps, each layer's share of token-slots
per expert (1/n_experts each when balanced) and the tokens dropped (0: the
experts have no capacity limit), in ``probes.jsonl`` under ``router``.
"""

from __future__ import annotations


class GradProbe:
    def __init__(self, model, world=None):
        import torch

        params, layer, kind = [], [], []
        for i, groups in enumerate(model.layer_params()):
            attn = {id(p) for p in groups["attn"]}
            mlp = {id(p) for p in groups["mlp"]}
            for p in groups["block"]:
                params.append(p)
                layer.append(i)
                kind.append(1 if id(p) in attn else 2 if id(p) in mlp else 0)
        dev = params[0].device if params else "cpu"
        self.params, self.world = params, world
        self.moe = list(getattr(model, "moe_layers", []))  # MoE: router load of the step's last forward
        self.depth = len(model.layer_params())
        self.layer = torch.tensor(layer, device=dev)
        self.kind = torch.tensor(kind, device=dev)

    def __call__(self) -> dict[str, list[float]]:
        import torch

        from depthwidth.train.parallel import global_sq_norms, local

        grads = [p.grad if p.grad is not None else torch.zeros_like(local(p)) for p in self.params]
        sq = (
            global_sq_norms(self.world, grads)
            if self.world is not None
            else torch.stack(torch._foreach_norm(grads)).float() ** 2
        )
        L = self.depth
        out = torch.zeros(3, L, device=sq.device)
        out[0].index_add_(0, self.layer, sq)
        out[1].index_add_(0, self.layer, torch.where(self.kind == 1, sq, 0.0))
        out[2].index_add_(0, self.layer, torch.where(self.kind == 2, sq, 0.0))
        block, attn, mlp = out.sqrt().tolist()  # the one host sync
        return {"block": block, "attn": attn, "mlp": mlp}

    def router(self) -> dict | None:
        """MoE: per layer, the share of token-slots each expert received in the step's last
        micro-batch (averaged over processes), and the tokens dropped (always 0: no capacity)."""
        if not self.moe:
            return None
        import torch

        from depthwidth.train import dist

        load = torch.stack([m.load for m in self.moe])
        if self.world is not None and self.world.distributed:
            load = dist.mean(self.world, load)
        return {"load": load.tolist(), "dropped": [0] * len(self.moe)}


def is_probe_step(step: int, every: int, at) -> bool:
    """``step`` counts completed steps (1-based)."""
    return (every > 0 and step % every == 0) or step in set(at or ())
