"""Run identity: which part of a resolved config decides a run's results.

``run_id(cfg)`` hashes that part, so the same config is never trained twice
and one W&B run spans every restart.  Where and how a run executes (run
directory, launcher, tracker, device, logging and checkpoint cadence) is not
part of it; the numeric precision is (``train.precision``, resolved before
hashing: a CPU fp32 run and a CUDA bf16 run of one config are two runs).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Keys that change where or how a run is executed, not what it computes: they
# are left out of the run id so a resubmission with another launcher, device or
# logging cadence is recognised as the same run.
NOT_IDENTITY = {
    "run": ("dir", "sweep"),
    "train": (
        "device",
        "threads",
        "log_every",
        "ckpt_every",
        "keep_ckpts",
        "compile",
        "micro_batch_size",
        "parallel",
        "activation_checkpointing",
        "analyze_at_end",
        "eval_tasks",
    ),
    "probe": ("entropy_every",),  # a no-grad forward on held-out tokens: it changes nothing the run computes
    "tracker": None,  # whole group
    "provenance": None,
    "accounting": None,
    "run_id": None,
    "launcher": None,
}


# Settings added after runs already existed: at their "off" value (or when the
# option they refine is off) they are left out of the hash, so every run that
# does not use them keeps the run id it had, and a resubmitted old sweep finds
# its finished runs instead of training them again.
_MOE = ("n_experts", "top_k", "expert_hidden", "aux_loss_coef", "router_z")
_MUP = ("m_width", "m_emb", "m_residual")
_POWER = ("power_a", "power_exponent")


def _later_additions(group: str, v: dict) -> set[str]:
    if group == "model":
        drop = set(_MOE) if v.get("mlp") != "moe" else set()
        if not v.get("mup"):
            drop |= {"mup", *_MUP}
        if v.get("attn_scale") == "auto":
            drop.add("attn_scale")
        return drop
    if group == "optim":
        return set(_POWER) if v.get("schedule") != "power" else set()
    return set()


def identity(cfg: Any) -> dict:
    """The part of a resolved config (a composed Node tree, or the same as plain dicts) that
    determines the run's results."""
    out = {}
    for k, v in cfg.items():
        if k in NOT_IDENTITY:
            drop = NOT_IDENTITY[k]
            if drop is None:
                continue
            v = {kk: vv for kk, vv in v.items() if kk not in drop}
        if isinstance(v, dict):
            later = _later_additions(k, v)
            v = {kk: vv for kk, vv in v.items() if kk not in later}
        out[k] = v
    return out


def run_id(cfg: Any) -> str:
    """Stable id: a hash of the resolved config's identity part (12 hex digits).
    ``train.precision`` must be resolved (fp32 | bf16) first: ``auto`` names no precision."""
    ident = identity(cfg)
    if (ident.get("train") or {}).get("precision") == "auto":
        raise ValueError("run_id: resolve train.precision=auto (train.plan.precision_for) before hashing")
    blob = json.dumps(ident, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def group_id(cfg: Any, tuned) -> str:
    """A tuning group's id: the run id's hash of the config with the ``tuned`` keys (``optim.lr`` ...)
    left out, so the runs of one group share it whatever their tuned values, and a resubmission
    finds the same groups.  The tuned keys' names are part of it (a group tuned over lr differs
    from one tuned over lr and batch size)."""
    ident = json.loads(json.dumps(identity(cfg), sort_keys=True, default=str))
    for key in tuned:
        *path, leaf = key.lstrip("+").split(".")
        node = ident
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    blob = json.dumps({"config": ident, "tuned": sorted(tuned)}, sort_keys=True, separators=(",", ":"))
    return "g" + hashlib.sha256(blob.encode()).hexdigest()[:11]


def config_key(cfg: Any) -> str:
    """The run's identity apart from its numeric precision: the same configuration submitted with
    another launcher (fp32 on a CPU, bf16 on a GPU) has another run id but this key, so ``dw
    suggest`` can recognise a store's runs whatever launcher the command names."""
    return group_id(cfg, ("train.precision",))
