"""dw — depth, width and width-shape scaling experiments for decoder-only transformers.

Importing the package is cheap: torch, pandas, scipy and matplotlib are only
imported by the modules that need them (model, train, fit, report).
"""

__version__ = "0.1.0"
