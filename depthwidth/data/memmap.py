"""data=memmap: pretokenized ``.bin`` shards + ``meta.json`` written by
``dw data prepare`` (prepare.py), read with np.memmap (never loaded into memory)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

import numpy as np

from depthwidth.core.errors import BadInput, bad
from depthwidth.core.provenance import fingerprint
from depthwidth.data.base import SPLITS, StreamSource, TokenStream

MEMMAP_FORMAT = "dw-tokens-v1"
DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}  # shards are little-endian


def read_meta(path: str | os.PathLike) -> dict:
    """meta.json of a prepared dataset directory; BadInput if it is not one."""
    d = Path(path)
    mp = d / "meta.json"
    if not d.is_dir():
        raise BadInput(f"data path {str(path)!r} is not a directory (prepare one with: dw data prepare --out DIR)")
    if not mp.is_file():
        raise BadInput(f"data path {str(path)!r} holds no meta.json (prepare one with: dw data prepare --out DIR)")
    try:
        meta = json.loads(mp.read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"unreadable {mp}: {' '.join(str(e).split())}") from None
    if not isinstance(meta, dict) or meta.get("format") != MEMMAP_FORMAT:
        raise BadInput(f"{mp} is not a dw token dataset (format {MEMMAP_FORMAT!r} expected)")
    return meta


def memmap_source(cfg: Mapping, seq_len: int) -> StreamSource:
    raw = cfg["path"]
    if not raw:
        raise bad("data.path", raw, "the directory written by dw data prepare")
    d = Path(os.path.expandvars(os.path.expanduser(str(raw))))
    if not d.exists():
        raise BadInput(
            f"data.path {str(raw)!r} does not exist (prepare it with: dw data prepare --source TEXT_DIR_OR_DATASET "
            f"--out {raw})"
        )
    meta = read_meta(d)
    vocab = cfg["vocab_size"]
    if vocab != meta.get("vocab_size"):
        raise BadInput(
            f"data.vocab_size {vocab!r} does not match {d / 'meta.json'} vocab_size {meta.get('vocab_size')!r}"
        )
    dtype = DTYPES.get(meta.get("dtype"))
    if dtype is None:
        raise BadInput(f"{d / 'meta.json'} dtype {meta.get('dtype')!r} not supported (allowed: uint16, uint32)")
    streams = {}
    try:
        shards = {
            split: [(d / sh["file"], int(sh["tokens"])) for sh in meta["splits"][split]["shards"]] for split in SPLITS
        }
    except (KeyError, TypeError, ValueError):
        raise BadInput(f"{d / 'meta.json'} is malformed: no splits.train/val.shards list") from None
    for split in SPLITS:
        parts = []
        for f, n in shards[split]:
            size = f.stat().st_size if f.is_file() else -1
            if size != n * dtype.itemsize:
                raise BadInput(f"shard {f} has {size} bytes, meta.json says {n} tokens of {meta['dtype']}")
            if n:
                parts.append(np.memmap(f, dtype=dtype, mode="r", shape=(n,)))
        streams[split] = TokenStream(parts)
    out_meta = {k: v for k, v in meta.items() if k != "splits"}
    out_meta.update(path=str(d.resolve()), tokens={s: streams[s].n for s in SPLITS})
    src = StreamSource("memmap", vocab, streams, out_meta, seq_len)
    shard_list = json.dumps({s: [[f.name, n] for f, n in shards[s]] for s in SPLITS})
    src._fingerprint = fingerprint("memmap", (d / "meta.json").read_bytes(), shard_list)
    return src
