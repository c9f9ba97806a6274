"""``python -m depthwidth`` is ``dw``."""

from depthwidth.cli import main

main()
