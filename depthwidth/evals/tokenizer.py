"""A run's text tokenizer: what turns a task's text into the ids the run was trained on.

Read from the run's own ``data`` group (its config.yaml), as data/source.py reads
the same data:

``pydoc``, tokenizer byte   UTF-8 bytes, ids 0..255
``pydoc``, tokenizer bpe    the BPE trained on the pydoc train split (``tokenizer.cached_bpe``:
                            its cache, or trained again, identically, when the cache is gone)
``memmap``                  the tokenizer ``dw data prepare`` recorded in the dataset's
                            meta.json: byte, a tokenizer.json (checked against its sha256) or cl100k
``synthetic``               none: a Markov chain over symbols has no text (bad input)

``prefix`` is the id a document is conditioned on (the harness's prefix token for
an empty context and the first rolling window): what precedes a document in the
run's training data.  That is the end-of-text id where the data has one (memmap:
every document ends with it); pydoc has none, its paragraphs follow a blank line,
so the id that ends "\\n\\n".
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from depthwidth.core.errors import BadInput

BYTES = 256  # ids 0..255 are the UTF-8 bytes of a byte tokenizer; 256 its end-of-text (memmap)


@dataclass(frozen=True)
class TextTokenizer:
    kind: str  # byte | bpe | file | cl100k
    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]  # never sees ``eot``
    prefix: int
    eot: int | None  # the end-of-text id, where the data has one: generation stops there


def text_tokenizer(data: Mapping, run_dir) -> TextTokenizer:
    """The tokenizer of a run's composed ``data`` group; BadInput when it has none or it is gone."""
    name = data.get("name")
    if name == "pydoc":
        return _pydoc(data)
    if name == "memmap":
        return _memmap(data)
    raise BadInput(
        f"run {run_dir} was trained on data={name} (a Markov chain over {data.get('vocab_size')} symbols): "
        "it has no text tokenizer, so no text task can be scored (allowed: runs on data=pydoc or data=memmap)"
    )


def _byte(prefix: int, eot: int | None) -> TextTokenizer:
    def decode(ids: list[int]) -> str:  # a partial UTF-8 sequence (a cut generation) decodes to U+FFFD
        return bytes(i for i in ids if i < BYTES).decode("utf-8", errors="replace")

    return TextTokenizer("byte", lambda s: list(s.encode("utf-8")), decode, prefix, eot)


def _pydoc(data: Mapping) -> TextTokenizer:
    if data.get("tokenizer") == "byte":
        return _byte(ord("\n"), None)
    from depthwidth.data.pydoc import fraction, pydoc_split
    from depthwidth.data.tokenizer import cached_bpe

    train, _, _ = pydoc_split(fraction(data["val_fraction"], "data.val_fraction", hi=0.5))
    tk, _ = cached_bpe(train, int(data["vocab_size"]), data.get("cache_dir"))
    encode = lambda s: tk.encode(s).ids  # noqa: E731 - as data/pydoc.py encodes the splits
    return TextTokenizer("bpe", encode, tk.decode, encode("\n\n")[-1], None)


def _memmap(data: Mapping) -> TextTokenizer:
    from depthwidth.data.memmap import read_meta
    from depthwidth.data.tokenizer import Cl100kTokenizer, FileTokenizer

    where = Path(os.path.expandvars(os.path.expanduser(str(data["path"]))))
    meta = read_meta(where)
    desc = meta.get("tokenizer") or {}
    eot = int(meta["eot"])
    kind = desc.get("kind")
    if kind == "byte":
        return _byte(eot, eot)
    if kind == "file":
        path = Path(str(desc.get("path")))
        if not path.is_file():
            raise BadInput(f"the tokenizer {path} that {where / 'meta.json'} names is gone (restore it to evaluate)")
        if hashlib.sha256(path.read_bytes()).hexdigest() != desc.get("sha256"):
            raise BadInput(f"the tokenizer {path} has changed since {where} was prepared (its sha256 differs)")
        tk = FileTokenizer(path).tk
        return TextTokenizer("file", lambda s: tk.encode(s, add_special_tokens=False).ids, tk.decode, eot, eot)
    if kind == "cl100k":
        enc = Cl100kTokenizer(desc.get("path")).enc
        return TextTokenizer("cl100k", enc.encode_ordinary, enc.decode, eot, eot)
    raise BadInput(f"{where / 'meta.json'} names no tokenizer dw knows (kind {kind!r}; allowed: byte, file, cl100k)")
