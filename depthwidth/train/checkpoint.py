"""Checkpoints: sharded (torch.distributed.checkpoint), atomic, checksummed.

``ckpt/step_00000040/`` is one checkpoint, written by every process at once:

    __0_0.distcp, ...   each rank's shards of the model and optimiser state
                        (DCP; FQN keys, so any layout — single, DDP, FSDP over
                        any number of processes — can load any other's)
    .metadata           DCP's index of the shards
    extra.pt            the loop's state (step, budget results, sampler, RNG,
                        wall time), written by rank 0; loaded weights_only
    MANIFEST            sha256 of every file above, written last

It is written under ``ckpt/.step_00000040.tmp/`` and renamed into place by
rank 0 only after every rank finished and the manifest is on disk, so a
checkpoint exists completely or not at all.  A directory whose files do not
match its manifest (a bad disk, a truncated copy) is skipped with a warning
and the previous one is used.  Half-written ``.tmp`` directories are never
read and are removed by the next save.  The newest ``keep`` checkpoints are
kept.  (Before the stage layout, checkpoints were single ``step_N.pt`` files;
their runs have other ids now and are not resumed.)

Loading runs no code from the files: ``extra.pt`` and the full model of
``read_model`` are read with ``weights_only=True``, and DCP's own
``.metadata`` index (a pickle that ``dcp`` unpickles as it is) is first read
by an unpickler that knows only the index's own classes (``METADATA_GLOBALS``,
torch dtypes): a tampered file of either kind is refused with a clear error
before anything in it is built.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import pickle
import shutil
import sys
import warnings
from pathlib import Path

from depthwidth.core.atomic import write_bytes, write_text
from depthwidth.core.errors import WorkFailed
from depthwidth.train.dist import barrier

MANIFEST = "MANIFEST"


def _dir(ckpt_dir: Path, step: int) -> Path:
    return Path(ckpt_dir) / f"step_{step:08d}"


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def _quiet():
    """DCP warns on every single-process save/load that it assumes one process: it does, on purpose."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*assuming the intent is to")
        yield


@contextlib.contextmanager
def _write_errors(tmp: Path):
    """A failed checkpoint write as an OSError naming the folder (ENOSPC when the disk is full):
    torch's writer reports a short write as a RuntimeError, which DCP wraps in its own exception."""
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        raise
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # a full disk: the partial shards would keep it full
        raise
    except BaseException as e:  # DCP's CheckpointException derives from BaseException
        free = shutil.disk_usage(tmp).free if tmp.exists() else -1
        code = errno.ENOSPC if 0 <= free < 1 << 20 else errno.EIO
        shutil.rmtree(tmp, ignore_errors=True)  # nothing loads a partial checkpoint: free its space (the
        # failure's record, the summary, the next attempt need it); the next save starts afresh anyway
        # DCP's message is every rank's traceback: name the first rank's own error instead
        failures = getattr(e, "failures", None) or {}
        cause = next(iter(failures.values()))[0] if failures else e
        why = f"{type(cause).__name__}: {' '.join(str(cause).split())[:200]}"
        raise OSError(code, f"{os.strerror(code)} ({why})", str(tmp)) from e


def save(ckpt_dir: Path, step: int, world, model, opt, extra: dict, keep: int = 2) -> Path:
    """Every rank calls this at the same step."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    ckpt_dir = Path(ckpt_dir)
    final = _dir(ckpt_dir, step)
    tmp = ckpt_dir / f".{final.name}.tmp"
    if world.main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    barrier(world)
    fresh = not opt.state  # no step taken yet: DCP fills the state in with a step at lr 0 (step count 1)
    msd, osd = get_state_dict(model, opt)
    with _quiet(), _write_errors(tmp):
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=str(tmp))
    if fresh:  # ... which the run must not keep: AdamW's bias correction counts its steps
        opt.state.clear()
        extra = {**extra, "optimizer_fresh": True}
    # every rank hashes the shard files it wrote (a 7B run's ~110 GB is hashed by all ranks at once)
    mine = {p.name: _sha(p) for p in sorted(tmp.glob(f"__{world.rank}_*.distcp"))}
    digests = _gather(world, mine)
    if world.main:
        buf = io.BytesIO()
        torch.save(extra, buf)
        with _write_errors(tmp):
            write_bytes(tmp / "extra.pt", buf.getvalue())
        for n in sorted(p.name for p in tmp.iterdir() if p.is_file()):
            if n not in digests:  # .metadata, extra.pt
                digests[n] = _sha(tmp / n)
        write_text(tmp / MANIFEST, "".join(f"{digests[n]}  {n}\n" for n in sorted(digests)))
        # Steps newer than this one are leftovers of a corrupt checkpoint we resumed
        # past: drop them, or pruning below could keep them and delete this one.
        for newer in [s for s in list_steps(ckpt_dir) if s > step]:
            shutil.rmtree(_dir(ckpt_dir, newer), ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in list_steps(ckpt_dir)[:-keep] if keep > 0 else []:
            shutil.rmtree(_dir(ckpt_dir, old), ignore_errors=True)
        for stale in ckpt_dir.glob(".step_*.tmp"):
            shutil.rmtree(stale, ignore_errors=True)
    barrier(world)
    return final


def list_steps(ckpt_dir: Path) -> list[int]:
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    return sorted(int(p.name.split("_")[1]) for p in ckpt_dir.glob("step_*") if p.is_dir())


def _gather(world, mine: dict) -> dict:
    """The union of every rank's dict (on every rank)."""
    if not world.distributed:
        return dict(mine)
    import torch.distributed as dist

    parts: list = [None] * world.size
    dist.all_gather_object(parts, mine)
    return {k: v for p in parts for k, v in p.items()}


def verify(path: Path, world=None) -> str | None:
    """None if every file matches the manifest, else why not.  With ``world``, every rank
    checks a share of the files and all ranks get the same answer."""
    m = path / MANIFEST
    if not m.is_file():
        return "no manifest"
    try:
        listed = dict(reversed(line.split("  ", 1)) for line in m.read_text().splitlines() if line.strip())
    except ValueError:
        return "unreadable manifest"
    if not listed:
        return "empty manifest"
    names = sorted(listed)
    share = names[world.rank :: world.size] if world is not None and world.distributed else names
    why = None
    for name in share:
        f = path / name
        if not f.is_file():
            why = f"{name} missing"
        elif _sha(f) != listed[name]:
            why = f"{name} checksum mismatch"
        if why:
            break
    if world is not None and world.distributed:
        found = sorted(v for v in _gather(world, {world.rank: why}).values() if v)
        why = found[0] if found else None
    return why


def latest(ckpt_dir: Path, world=None, warn=None) -> Path | None:
    """Newest checkpoint directory that verifies, or None.  Every rank calls it (each
    verifies a share of the files) and gets the same answer."""
    warn = warn or (lambda m: print(f"dw: warning: {m}", file=sys.stderr))
    for step in reversed(list_steps(ckpt_dir)):
        d = _dir(ckpt_dir, step)
        why = verify(d, world)
        if why is None:
            return d
        warn(f"checkpoint {d.name} is corrupt ({why}); falling back to the previous one")
    return None


# what DCP's .metadata may name: its index classes and the values they hold
METADATA_GLOBALS = {
    *(
        ("torch.distributed.checkpoint.metadata", n)
        for n in (
            "Metadata",
            "MetadataIndex",
            "StorageMeta",
            "TensorProperties",
            "TensorStorageMetadata",
            "BytesStorageMetadata",
            "ChunkStorageMetadata",
            "_MEM_FORMAT_ENCODING",
        )
    ),
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("collections", "OrderedDict"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("pathlib", "WindowsPath"),
    ("pathlib", "PureWindowsPath"),
}


def _refused(path: Path, why: str) -> WorkFailed:
    why = " ".join(str(why).split())[:160]
    return WorkFailed(
        f"checkpoint {path} holds objects that are not plain data (refused: {why}); "
        "move it aside to resume from an earlier one"
    )


def check_metadata(path: Path) -> None:
    """Unpickle DCP's ``.metadata`` knowing only its own classes; refuse anything else."""
    import torch

    class Index(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in METADATA_GLOBALS or (
                module == "torch" and isinstance(getattr(torch, name, None), (torch.dtype, torch.memory_format))
            ):
                return super().find_class(module, name)
            raise pickle.UnpicklingError(f"{module}.{name} in .metadata")

    try:
        with open(path / ".metadata", "rb") as f:
            Index(f).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError) as e:
        raise _refused(path, e) from None


def load(path: Path, model, opt) -> dict:
    """Restore model and optimiser (resharded to this layout) in place; returns extra."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    check_metadata(path)
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd}
    with _quiet():
        dcp.load(state, checkpoint_id=str(path))
    kernels = [(g.get("fused"), g.get("foreach")) for g in opt.param_groups]
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    for g, (fused, foreach) in zip(opt.param_groups, kernels):  # this layout's kernel, not the writer's
        g["fused"], g["foreach"] = fused, foreach
    try:
        extra = torch.load(path / "extra.pt", map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:  # weights_only refused an object: never unpickle it
        raise _refused(path, e) from None
    if extra.get("optimizer_fresh"):  # saved before the first step: the optimizer had no state (save())
        opt.state.clear()
    return extra


def read_model(path: Path) -> dict:
    """The model's tensors (full, unsharded, on the CPU) of checkpoint ``path``, without
    building the model: what analyses and checks need."""
    import tempfile

    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    check_metadata(path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "full.pt"
        dcp_to_torch_save(str(path), str(out))
        state = torch.load(out, map_location="cpu", weights_only=True)
    return state["model"]
