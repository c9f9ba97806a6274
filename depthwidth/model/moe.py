"""A mixture of SwiGLU experts: the MLP of one layer of ``model.mlp=moe``.

As in the VWT paper's MoE model (``configs/moe_1b3b.yml``, docs/science.md §2):
``n_experts`` experts per layer (22), top-k routing (3), no shared expert;
expert i of a layer of width w_i has hidden width round(w_i · expert_hidden / h)
(512 at h = 1600), so the experts narrow with the layer.

Router: a bias-free Linear w_i → E gives logits r; each token takes the k
experts with the largest logits and weights them with a softmax over those k
logits only, so a token's k weights sum to 1 (lm-engine's normalised top-k:
the same as renormalising the top-k of softmax(r)).

Auxiliary loss per layer, exactly lm-engine's ``MoE._compute_switch_loss``:
    aux = E · Σ_e f_e · P_e  +  z · mean_tokens (logsumexp r)²,
    f_e = (token-slots routed to e) / (N·k),   P_e = mean over tokens of softmax(r)_e,
the Switch Transformer's load balance (minimal, = 1, when routing is uniform)
plus the ST-MoE router z-loss, which lm-engine builds in at z = 0.1
(``router_z``).  In training with several processes f_e counts the slots of
all of them (an all-reduce, as lm-engine does), so the data-parallel average
of the gradients equals one process's on the whole batch.  The model adds
``aux_loss_coef`` · Σ_layers aux to the training objective.  No capacity
limit: every token reaches its k experts, none is dropped (``dropped`` is
recorded as 0 so the report can say so).

Dispatch is batched, never a loop over tokens: the N·k (token, expert) slots
are sorted by expert, the tokens gathered in that order, each expert's
contiguous run multiplied by its weights (a loop over the E experts, the
grouped matmul), and the weighted outputs added back to their tokens with one
``index_add_``.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn import functional as F


class MoE(nn.Module):
    def __init__(self, width: int, hidden: int, n_experts: int, top_k: int, router_z: float = 0.1):
        super().__init__()
        self.width, self.hidden, self.n_experts, self.top_k, self.router_z = width, hidden, n_experts, top_k, router_z
        self.router = nn.Linear(width, n_experts, bias=False)
        # Expert weights stacked along dim 0, laid out like nn.Linear weights (out, in).
        self.w_fc = nn.Parameter(torch.empty(n_experts, hidden, width))  # up projection
        self.w_gate = nn.Parameter(torch.empty(n_experts, hidden, width))  # SwiGLU gate
        self.w_proj = nn.Parameter(torch.empty(n_experts, width, hidden))  # writes into the residual stream
        self.aux: torch.Tensor | None = None  # this forward's load-balancing loss
        self.load: torch.Tensor | None = None  # this forward's share of token-slots per expert (E,)
        self.on_hidden = None  # analysis hook: called as on_hidden(e, hidden activations of expert e)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x: (N, w) -> (router logits (N, E), top-k weights (N, k), top-k experts (N, k))."""
        logits = self.router(x)
        top, experts = logits.topk(self.top_k, dim=-1)
        low = top.dtype in (torch.float16, torch.bfloat16)  # softmax in fp32 at least (fp64 stays fp64)
        weights = F.softmax(top.float() if low else top, dim=-1).to(x.dtype)
        return logits, weights, experts

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert e on a batch of its tokens x: (n, w) -> (n, w)."""
        a = F.silu(x @ self.w_gate[e].t()) * (x @ self.w_fc[e].t())
        if self.on_hidden is not None:
            self.on_hidden(e, a)
        return a @ self.w_proj[e].t()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        xt = x.reshape(-1, self.width)
        N, E, k = xt.size(0), self.n_experts, self.top_k
        logits, weights, experts = self.route(xt)

        flat = experts.reshape(-1)  # slot s = token s // k, its (s % k)-th choice
        order = flat.argsort(stable=True)  # slots grouped by expert
        counts = torch.bincount(flat, minlength=E)
        token = order // k
        # one host sync for the split sizes; an expert with no tokens gets an empty (0, w) batch
        y = torch.cat([self.expert(e, part) for e, part in enumerate(xt[token].split(counts.tolist()))])
        y = y * weights.reshape(-1)[order].unsqueeze(-1).to(y.dtype)
        # the k contributions of a token are summed in fp32 at least (bf16 under autocast otherwise)
        acc = torch.float32 if y.dtype in (torch.float16, torch.bfloat16) else y.dtype
        out = torch.zeros(N, self.width, dtype=acc, device=y.device).index_add_(0, token, y.to(acc)).to(y.dtype)

        if self.training:
            counts = _all_processes(counts)
        f = counts.to(torch.float64 if logits.dtype == torch.float64 else torch.float32) / counts.sum()
        r = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
        P = F.softmax(r, dim=-1).mean(0)
        self.aux = E * (f * P).sum() + self.router_z * (torch.logsumexp(r, dim=-1) ** 2).mean()
        self.load = f.detach()
        return out.view(shape)


def _all_processes(counts: torch.Tensor) -> torch.Tensor:
    """Token-slot counts summed over the data-parallel processes (identity on one)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        counts = counts.clone()
        dist.all_reduce(counts)
    return counts
