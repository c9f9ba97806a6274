"""Token sources for training (numpy only: training converts to tensors).

``make_source(data_cfg, seq_len)`` turns the Hydra ``data`` group into a
``TokenSource`` (base.py); the training loop draws ``(x, y)`` int64 batches
from its ``Sampler`` and evaluates on ``val_batches``.

Sources (``data.name``):

``pydoc``      the English reference text shipped in every CPython (pydoc.py).
``synthetic``  an order-k Markov chain with known entropy (synthetic.py).
``memmap``     pretokenized ``.bin`` shards + ``meta.json`` written by
               ``dw data prepare`` (prepare.py), read with np.memmap (memmap.py).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from depthwidth.config import schema
from depthwidth.config.schema import complete
from depthwidth.core.errors import BadInput, bad
from depthwidth.data.base import TokenSource
from depthwidth.data.memmap import memmap_source
from depthwidth.data.pydoc import pydoc_source
from depthwidth.data.synthetic import synthetic_source

SOURCES = schema.SOURCES


def make_source(data_cfg: Mapping, seq_len: int) -> TokenSource:
    """The composed ``data`` group (a mapping, config/node.py) -> a TokenSource."""
    if not isinstance(data_cfg, Mapping):
        raise bad("data config", type(data_cfg).__name__, "a mapping")
    name = data_cfg.get("name")
    if not isinstance(seq_len, (int, np.integer)) or isinstance(seq_len, bool) or seq_len < 1:
        raise bad("seq_len", seq_len, "an integer >= 1")
    if "vocab_size" not in data_cfg:
        raise BadInput(f"data config {name!r} has no vocab_size key (every data config needs one)")
    if name in SOURCES:  # a group given in part (tests, notebooks): the schema's defaults fill the rest
        data_cfg = complete("data", data_cfg)
    if name == "pydoc":
        return pydoc_source(data_cfg, int(seq_len))
    if name == "memmap":
        return memmap_source(data_cfg, int(seq_len))
    if name == "synthetic":
        return synthetic_source(data_cfg, int(seq_len))
    raise bad("data.name", name, ", ".join(SOURCES))
