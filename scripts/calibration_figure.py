"""The coverage figure of the fit-analyses guide, drawn from its measured table.

``benchmarks/bench_calibration.py`` measures how often each nominal-95% interval holds its planted
value; docs/guides/fit-analyses.md tables the result ("Coverage: do the intervals hold the
truth?").  This script reads that table (nothing is typed twice) and draws it: one row per number,
one marker per resampling and D_crit form, a range where the table gives one (D_crit at 15 widths),
the nominal 95% and the ±2 standard errors of a coverage measured on 200 sweeps.

    python scripts/calibration_figure.py            # writes docs/calibration_coverage.png
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guides" / "fit-analyses.md"
OUT = ROOT / "docs" / "calibration_coverage.png"
COLUMNS = ("log form: noise (default)", "log form: runs (before)", "power form: noise", "power form: runs")


def table(text: str) -> list[tuple[str, list[tuple[list[float], bool]], int]]:
    """(number, [(coverages, a range?) per column: one value, several, or a range's ends], sweeps)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| number | nominal |"))
    rows = []
    for ln in lines[start + 2 :]:
        if not ln.startswith("|"):
            break
        cells = [c.strip() for c in ln.strip("|").split("|")]
        vals = [([float(x) for x in re.findall(r"\d+(?:\.\d+)?(?=%|–)", c)], "–" in c) for c in cells[2:6]]
        rows.append((cells[0].replace("`", ""), vals, int(re.match(r"\d+", cells[6]).group())))
    return rows


def draw(rows, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(s for *_, s in rows)
    se = math.sqrt(0.95 * 0.05 / n) * 100
    fig, ax = plt.subplots(figsize=(8.5, 0.42 * len(rows) + 1.6))
    ax.axvspan(95 - 2 * se, 95 + 2 * se, color="0.9", label=f"95% ± 2 s.e. ({n} sweeps)")
    ax.axvline(95, color="0.4", lw=1)
    marks = ("o", "s", "^", "D")
    for j, (col, m) in enumerate(zip(COLUMNS, marks)):
        for i, (_, vals, _) in enumerate(rows):
            y = len(rows) - 1 - i + (j - 1.5) * 0.16
            v, is_range = vals[j]
            if is_range:  # D_crit at the grid's widths: the range over them
                ax.plot(v, [y, y], color=f"C{j}", lw=2)
            ax.plot(v, [y] * len(v), m, color=f"C{j}", ms=4, label=col if i == 0 else None)
    ax.set_yticks(range(len(rows)), [r[0] for r in reversed(rows)], fontsize=7)
    ax.set_xlabel("coverage of the nominal 95% interval (%)")
    ax.set_title("Do dw fit's intervals hold the planted truth? (bench_calibration.py)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    draw(table(GUIDE.read_text(encoding="utf-8")), a.out)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
