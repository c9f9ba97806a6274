"""The reliability suite's ledger: every test records what it injected and what it measured.

``DW_RELIABILITY_LEDGER=FILE`` (set by ``make test-reliability``) collects one JSON line
per record; ``python -m tests.reliability.summary FILE`` prints the one-line total.
Without it nothing is recorded (plain ``make test``)."""

from __future__ import annotations

import json
import os

import pytest


@pytest.fixture
def ledger(request):
    def record(*, faults: int, recovered: int, lost: int, duplicates: int) -> None:
        path = os.environ.get("DW_RELIABILITY_LEDGER")
        if not path:
            return
        row = {
            "test": request.node.nodeid,
            "faults": faults,
            "recovered": recovered,
            "lost": lost,
            "duplicates": duplicates,
        }
        with open(path, "a") as f:  # one short line per write: O_APPEND keeps lines whole
            f.write(json.dumps(row) + "\n")

    return record
