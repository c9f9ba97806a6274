"""Configuration, one home per concept:

- schema.py   every setting of every group: its one default, type (Literal choices), range and doc;
              the bases of the conf/ preset chains
- check.py    validation of a composed config against the schema (one-line errors)
- compose.py  the one composer of conf/ presets + overrides (``dw train``, ``dw sweep``; a test
              checks it against Hydra's compose), preset chains, did-you-mean for keys
- overrides.py override strings in Hydra's grammar: parsed (Hydra's parser), written back
- node.py     ``RunConfig``: the one typed config downstream (``Node``: its groups)
- docs.py     ``dw config show`` and the settings reference (docs/reference/settings.md), generated from the schema
- identity.py run ids: which part of a config decides a run's results
"""
