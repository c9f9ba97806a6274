"""Every option of ``dw data prepare``, in one place: its flags are made from ``PREPARE_OPTIONS``
(cli/options.py), whose names are ``prepare()``'s keywords (data/prepare.py).

Standard library only: ``dw --help`` builds the flags from this table.
"""

from __future__ import annotations

from depthwidth.core.options import Option

PREPARE_OPTIONS = (
    Option(
        "source",
        ...,
        "text file (blank-line separated documents) | directory of "
        ".txt/.md files (one document each) | dataset saved with save_to_disk | hub name "
        "(owner/name or hf:NAME, streamed)",
        kind=str,
    ),
    Option(
        "tokenizer",
        "byte",
        "byte (vocab 257, eot 256) | cl100k (tiktoken; the VWT paper's, vocab 100263) | "
        "cl100k:PATH/cl100k_base.tiktoken | PATH/tokenizer.json",
    ),
    Option("out", ..., "output directory (new or empty; rerunning with the same settings is a no-op)", kind=str),
    Option("text_column", "text", "column holding the text (HF datasets)"),
    Option("split", "train", "split to read (HF datasets)"),
    Option(
        "val_fraction",
        0.01,
        "validation holds at least this fraction of the tokens, in (0, 1): documents whose text hash falls "
        "below it, topped up by the lowest-hash others",
    ),
    Option(
        "val_min_tokens",
        None,
        "validation holds at least this many tokens too (default 100,000: data/valsplit.py), but never more "
        "than half the corpus for it (a smaller corpus: a warning); 0: no minimum",
        kind=int,
    ),
    Option("shard_tokens", 1 << 26, "tokens per .bin shard (memory used while writing ~ one shard)"),
    Option("limit_docs", None, "stop after this many documents", kind=int),
    Option("dtype", "auto", "auto (uint16 if the vocabulary fits, else uint32) | uint16 | uint32"),
    Option("as_json", False, "print meta.json instead of a table", flag="--json"),
)
