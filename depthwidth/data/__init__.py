"""Token data: the source interface (base.py), the sources (pydoc.py,
synthetic.py, memmap.py; ``make_source`` in source.py), tokenizers
(tokenizer.py) and ``dw data prepare`` (prepare.py).  numpy only."""
