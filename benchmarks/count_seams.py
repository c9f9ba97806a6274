"""The backend seam, counted (issue #35, item 4): where SLURM commands run, and where code branches
on a launcher's name.

    python benchmarks/count_seams.py            # one JSON line: totals and the sites per module
    python benchmarks/count_seams.py --list     # ... and every site, one per line

A *SLURM command site* is code (never a docstring or a comment) that names a SLURM command as the
program to run: a list or tuple whose first item is ``"sbatch"``, ``"scontrol"``, ``"squeue"``,
``"sacct"``, ``"scancel"``, ``"sacctmgr"`` or ``"srun"`` (an argv), such a name passed to a call
(``shutil.which("sbatch")``) or given as a default (``scancel="scancel"``), every ``import
submitit``, and each shell line of a job script that runs one (``$(scontrol show hostnames ...)``
in an sbatch file's set-up).  Messages that name a command (``"sbatch of X failed"``) are not sites.

A *launcher branch* is a comparison with a launcher's name: ``== / != "slurm" | "local" | "debug"``,
or ``in / not in`` a tuple or list of them.  Comparisons whose other side is plainly not a launcher
(a log level, a ``launcher.gpus`` value) are not told apart: the count is an upper bound.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "depthwidth"
COMMANDS = {"sbatch", "scontrol", "squeue", "sacct", "scancel", "sacctmgr", "srun"}
NAMES = {"slurm", "local", "debug"}
SHELL = re.compile(r"\$\((?:%s)\s" % "|".join(sorted(COMMANDS)))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _command(node) -> bool:
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return False
    word = node.value.strip().split(" ", 1)[0] if node.value.strip() else ""
    return word in COMMANDS and (node.value == word or " " in node.value.strip())


def command_sites(tree: ast.AST) -> list[int]:
    docs, lines = _docstrings(tree), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m == "submitit" or m.startswith("submitit.") for m in mods):
                lines.append(node.lineno)
        elif isinstance(node, (ast.List, ast.Tuple)) and node.elts and _command(node.elts[0]):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call):
            lines += [a.lineno for a in node.args if _command(a) and a.value in COMMANDS]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
            lines += [d.lineno for d in defaults if _command(d) and d.value in COMMANDS]
        elif isinstance(node, ast.Constant) and id(node) not in docs and isinstance(node.value, str):
            if SHELL.search(node.value):
                lines.append(node.lineno)  # a shell line of a job script
    return sorted(set(lines))


def _names(node) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(isinstance(e, ast.Constant) and e.value in NAMES for e in node.elts)
    return False


def launcher_branches(tree: ast.AST) -> list[int]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            ops = node.ops
            if any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in ops) and any(
                _names(s) for s in sides
            ):
                out.append(node.lineno)
    return sorted(out)


def count(root: Path = ROOT) -> dict:
    cmd, br = {}, {}
    for p in sorted(root.rglob("*.py")):
        tree = ast.parse(p.read_text())
        rel = str(p.relative_to(root.parent))
        if c := command_sites(tree):
            cmd[rel] = c
        if b := launcher_branches(tree):
            br[rel] = b
    return {
        "slurm_command_sites": sum(len(v) for v in cmd.values()),
        "slurm_command_modules": len(cmd),
        "launcher_branches": sum(len(v) for v in br.values()),
        "launcher_branch_modules": len(br),
        "commands_per_module": {k: len(v) for k, v in cmd.items()},
        "branches_per_module": {k: len(v) for k, v in br.items()},
        "_sites": {"commands": cmd, "branches": br},
    }


def main(argv: list[str]) -> int:
    doc = count()
    sites = doc.pop("_sites")
    print(json.dumps(doc))
    if "--list" in argv:
        for kind, per in sites.items():
            for mod, lines in per.items():
                src = (ROOT.parent / mod).read_text().splitlines()
                for ln in lines:
                    print(f"{kind:9} {mod}:{ln}: {src[ln - 1].strip()[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
