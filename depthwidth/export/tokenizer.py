"""The text tokenizer of an exported run, as Hugging Face files, or why there is none.

A run's ``data`` group says which tokenizer made its token ids (data/source.py):

pydoc, byte     UTF-8 bytes, vocabulary 256: a byte-level BPE with no merges, id = byte
pydoc, bpe      the byte-level BPE dw trained on pydoc's train split (data/tokenizer.py),
                its cached tokenizer.json (trained again, identically, when the cache is gone)
memmap          what ``dw data prepare`` recorded in the dataset's meta.json: ``byte`` (bytes,
                end-of-text 256), a tokenizer.json (``file``: copied when its sha256 still
                matches; an end-of-text dw appended gets its id), or ``cl100k`` (tiktoken's
                ranks converted to a byte-level BPE, end-of-text 100257)
synthetic       symbols of a Markov chain: no text, no tokenizer

``for_run`` never fails on a tokenizer it cannot rebuild (a dataset or file gone since the
run, tiktoken missing): the model is still worth exporting, and ``warning`` says what is
missing.  ``write`` saves ``tokenizer.json`` + ``tokenizer_config.json`` for transformers'
fast tokenizer (``AutoTokenizer.from_pretrained``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

EOT = "<|endoftext|>"  # the end-of-text token dw appends after every document


@dataclass
class HFTokenizer:
    tokenizer: Any | None  # a ``tokenizers.Tokenizer``, or None: no text tokenizer
    kind: str  # byte | bpe | file | cl100k | none
    eos_token: str | None
    eos_id: int | None
    note: str  # one sentence for the model card
    warning: str | None = None  # a tokenizer the run used that could not be rebuilt
    prefix_id: int | None = None  # what a document is conditioned on when its context is empty (dw eval's)

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "eos_token": self.eos_token,
            "eos_token_id": self.eos_id,
            "prefix_token_id": self.prefix_id if self.prefix_id is not None else self.eos_id,
            "note": self.note,
        }


def for_run(data: Mapping, seq_len: int) -> HFTokenizer:
    """The tokenizer of a run's (composed) ``data`` group."""
    name = data.get("name")
    if name == "synthetic":
        return _none(
            f"synthetic data (an order-{data.get('order')} Markov chain over {data.get('vocab_size')} symbols): "
            "token ids are symbols, there is no text tokenizer"
        )
    if name == "pydoc":
        if data.get("tokenizer") == "byte":
            # no end-of-text byte: documents follow a blank line, so "\n" (10) is their prefix, as dw eval's
            note = "UTF-8 bytes: token id = byte value (0-255)"
            return HFTokenizer(byte_level(), "byte", None, None, note, prefix_id=10)
        return _pydoc_bpe(data, seq_len)
    if name == "memmap":
        return _prepared(data)
    return _none(f"data source {name!r}: dw knows no text tokenizer for it")


def _none(note: str, warning: str | None = None) -> HFTokenizer:
    return HFTokenizer(None, "none", None, None, note, warning)


def _pydoc_bpe(data: Mapping, seq_len: int) -> HFTokenizer:
    from tokenizers import Tokenizer

    from depthwidth.data.source import make_source

    path = make_source(data, seq_len).meta["tokenizer"]["path"]  # the cached BPE (trained again if gone)
    note = f"byte-level BPE trained by dw on the pydoc train split (vocabulary {data.get('vocab_size')})"
    tok = Tokenizer.from_file(str(path))
    return HFTokenizer(tok, "bpe", None, None, note, prefix_id=tok.encode("\n\n").ids[-1])  # a blank line's end


def _prepared(data: Mapping) -> HFTokenizer:
    from depthwidth.core.errors import BadInput
    from depthwidth.data.memmap import read_meta

    raw = str(data.get("path"))
    try:
        meta = read_meta(os.path.expandvars(os.path.expanduser(raw)))
    except BadInput as e:
        return _none("the prepared dataset is not readable here", f"no tokenizer written: {e}")
    t = meta.get("tokenizer") or {}
    kind = t.get("kind")
    if kind == "byte":
        return HFTokenizer(byte_level(eot=True), "byte", EOT, 256, f"UTF-8 bytes: id = byte value; {EOT} = 256")
    if kind == "file":
        return _file(t)
    if kind == "cl100k":
        return _cl100k(t)
    return _none(f"dataset {raw} names tokenizer kind {kind!r}", f"no tokenizer written: unknown kind {kind!r}")


def _file(t: Mapping) -> HFTokenizer:
    from tokenizers import Tokenizer

    path = Path(str(t.get("path")))
    if not path.is_file():
        return _none(f"tokenizer {path} (not found at export)", f"no tokenizer written: {path} no longer exists")
    if hashlib.sha256(path.read_bytes()).hexdigest() != t.get("sha256"):
        return _none(
            f"tokenizer {path} (changed since the data was prepared)",
            f"no tokenizer written: {path} changed since the data was prepared (sha256 differs)",
        )
    tk = Tokenizer.from_file(str(path))
    eos, eot = t.get("eot_token"), t.get("eot")
    if t.get("eot_appended"):  # dw gave end-of-text the id one past the file's vocabulary
        tk.add_special_tokens([EOT])
        eos = EOT
        if tk.token_to_id(EOT) != eot:
            return _none(f"tokenizer {path}", f"no tokenizer written: {EOT} would get id {tk.token_to_id(EOT)}")
    return HFTokenizer(tk, "file", eos, eot, f"the tokenizer.json the data was prepared with ({path.name})")


def _cl100k(t: Mapping) -> HFTokenizer:
    from depthwidth.core.errors import BadInput
    from depthwidth.data.tokenizer import Cl100kTokenizer

    try:
        enc = Cl100kTokenizer(t.get("path")).enc
    except BadInput as e:
        return _none("cl100k_base (tiktoken)", f"no tokenizer written: {e}")
    except Exception as e:  # tiktoken fetches its ranks on first use: offline, that fails
        why = " ".join(str(e).split())[:160]
        return _none("cl100k_base (tiktoken)", f"no tokenizer written: cl100k_base unavailable ({why})")
    note = f"OpenAI's cl100k_base (tiktoken), converted to a byte-level BPE; {EOT} = {enc.eot_token}"
    return HFTokenizer(from_tiktoken(enc), "cl100k", EOT, int(enc.eot_token), note)


def _byte_chars() -> list[str]:
    """GPT-2's printable stand-in for each byte (what a byte-level pre-tokenizer emits)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def byte_level(eot: bool = False):
    """Token id = byte value: a byte-level BPE over the 256 bytes with no merges (+ <|endoftext|> = 256)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tk = Tokenizer(models.BPE(vocab={c: b for b, c in enumerate(_byte_chars())}, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tk.decoder = decoders.ByteLevel()
    if eot:
        tk.add_special_tokens([EOT])
    return tk


def from_tiktoken(enc):
    """A tiktoken ``Encoding`` as a ``tokenizers`` byte-level BPE giving the same ids for ordinary
    text, with <|endoftext|> at tiktoken's own id (cl100k leaves a gap before it, so the token is
    put in the vocabulary first: transformers' converter would give it the next free id)."""
    from tokenizers import Tokenizer
    from transformers.convert_slow_tokenizer import TikTokenConverter

    conv = TikTokenConverter(pattern=enc._pat_str)
    conv.load_tiktoken_bpe = lambda _: enc._mergeable_ranks  # the ranks tiktoken already holds
    d = json.loads(conv.converted().to_str())
    d["model"]["vocab"][EOT] = int(enc.eot_token)
    d["added_tokens"] = [
        {
            "id": int(enc.eot_token),
            "content": EOT,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    ]
    return Tokenizer.from_str(json.dumps(d))


def write(tok: HFTokenizer, folder: Path, seq_len: int) -> list[str]:
    """tokenizer.json + tokenizer_config.json for ``AutoTokenizer``; nothing without a text tokenizer."""
    if tok.tokenizer is None:
        return []
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok.tokenizer,
        eos_token=tok.eos_token,
        model_max_length=seq_len,
        clean_up_tokenization_spaces=False,
    )
    return sorted(Path(p).name for p in fast.save_pretrained(str(folder)))
