"""data=pydoc: the English reference text shipped in every CPython (``pydoc_data.topics``).

Byte-level (vocab 256) or BPE trained locally (``tokenizer: bpe``, cached,
see tokenizer.py).  Split: topics in sorted order are cut into paragraphs
(blank-line separated); exact duplicate paragraphs are dropped (pydoc repeats
whole sections across topics); the last ``val_fraction`` of the characters,
at a paragraph boundary, is validation.  The two splits are tokenised
separately, so no token straddles them.
"""

from __future__ import annotations

import hashlib
import re
import sys
from typing import Any, Mapping

import numpy as np

from depthwidth.core.errors import bad
from depthwidth.data.base import StreamSource, TokenStream
from depthwidth.data.tokenizer import MAX_BPE_VOCAB, MIN_BPE_VOCAB, cached_bpe


def pydoc_split(val_fraction: float) -> tuple[str, str, dict]:
    """(train_text, val_text, info): the deduplicated pydoc paragraphs, tail held out."""
    from pydoc_data.topics import topics

    paras: list[str] = []
    seen: set[str] = set()
    for key in sorted(topics):
        for p in re.split(r"\n[ \t]*\n", topics[key]):
            p = p.strip("\n")
            if p.strip() and p not in seen:
                seen.add(p)
                paras.append(p)
    total = sum(len(p) for p in paras)
    cut, acc = len(paras), 0
    while cut > 1 and acc < val_fraction * total:
        cut -= 1
        acc += len(paras[cut])
    train, val = "\n\n".join(paras[:cut]) + "\n", "\n\n".join(paras[cut:]) + "\n"
    info = {
        "python": sys.version.split()[0],
        "topics": len(topics),
        "paragraphs": {"train": cut, "val": len(paras) - cut},
        "chars": {"train": len(train), "val": len(val)},
        "text_sha256": hashlib.sha256((train + "\x00" + val).encode()).hexdigest(),
        "split_rule": "topics sorted, cut into blank-line paragraphs, exact duplicates dropped; "
        "the last val_fraction of characters (at a paragraph boundary) is val",
    }
    return train, val, info


def pydoc_source(cfg: Mapping, seq_len: int) -> StreamSource:
    tok = cfg["tokenizer"]
    vocab = cfg["vocab_size"]
    vf = fraction(cfg["val_fraction"], "data.val_fraction", hi=0.5)
    train, val, info = pydoc_split(vf)
    if tok == "byte":
        if vocab != 256:
            raise bad("data.vocab_size", vocab, "256 for data=pydoc with tokenizer=byte")
        ids = {s: np.frombuffer(t.encode("utf-8"), dtype=np.uint8) for s, t in (("train", train), ("val", val))}
        tmeta: dict[str, Any] = {"kind": "byte"}
    elif tok == "bpe":
        if not isinstance(vocab, int) or not MIN_BPE_VOCAB <= vocab <= MAX_BPE_VOCAB:
            raise bad("data.vocab_size", vocab, f"an integer in [{MIN_BPE_VOCAB}, {MAX_BPE_VOCAB}] for tokenizer=bpe")
        tk, path = cached_bpe(train, vocab, cfg["cache_dir"])
        ids = {s: np.asarray(tk.encode(t).ids, dtype=np.uint16) for s, t in (("train", train), ("val", val))}
        tmeta = {
            "kind": "bpe",
            "path": str(path),
            "trained_on": "pydoc train split",
            "learned_vocab": tk.get_vocab_size(),
        }
    else:
        raise bad("data.tokenizer", tok, "byte, bpe")
    meta = {
        "source": "pydoc",
        "tokenizer": tmeta,
        "vocab_size": vocab,
        "val_fraction": vf,
        **info,
        "tokens": {s: int(len(a)) for s, a in ids.items()},
    }
    return StreamSource("pydoc", vocab, {s: TokenStream([a]) for s, a in ids.items()}, meta, seq_len)


def fraction(v, name: str, hi: float = 1.0) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < float(v) <= hi:
        raise bad(name, v, f"a number in (0, {hi}]")
    return float(v)
