"""Configuration, one home per concept:

- schema.py   every setting of every group: its one default, type (Literal choices), range and doc;
              the bases of the conf/ preset chains
- check.py    validation of a composed config against the schema (one-line errors)
- compose.py  Hydra composition of conf/ (``dw train``), preset chains, did-you-mean for keys
- fast.py     the sweep's own composer (same chains, same result: a test compares them)
- node.py     ``Node``: the one type a composed config has downstream
- docs.py     ``dw config show`` and the settings reference (docs/reference/settings.md), generated from the schema
- identity.py run ids: which part of a config decides a run's results
"""
