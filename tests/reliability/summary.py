"""``python -m tests.reliability.summary LEDGER``: the reliability suite in one line."""

from __future__ import annotations

import json
import sys


def main(path: str) -> int:
    rows = [json.loads(x) for x in open(path) if x.strip()] if path else []
    tot = {k: sum(r[k] for r in rows) for k in ("faults", "recovered", "lost", "duplicates")}
    print(
        f"reliability: {tot['faults']} faults injected, {tot['recovered']} runs recovered, "
        f"{tot['lost']} records lost, {tot['duplicates']} duplicates ({len(rows)} checks)"
    )
    return 0 if rows and tot["lost"] == 0 and tot["duplicates"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
