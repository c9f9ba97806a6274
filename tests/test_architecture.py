"""The layout holds: imports flow one way (import-linter contracts in
pyproject.toml), no cycles inside a folder, no module reaches into another's
private names, report/ imports no verdict rule of fit/, no module grows past a sanity ceiling of
800 lines, and the light commands stay light (no torch)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

PKG = REPO / "depthwidth"
# A ceiling, not a target: modules split where concepts split, and one concept may take a long,
# readable file (torchtitan's trainer is ~600 lines; fit/verdicts.py, every verdict of a fit in one
# place, #35, ~760).  Formatted by ruff at 120 columns.
MAX_LINES = 800


def _lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.fail(f"lint-imports not installed beside {sys.executable} (pip install -e '.[dev]')")
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_import_contracts_are_kept():
    p = _lint_imports(REPO, REPO)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "2 kept, 0 broken" in p.stdout


@pytest.mark.parametrize(
    "module, line, broken",
    [
        # core importing a stage above it: the layers contract breaks
        ("core/atomic.py", "from depthwidth.cli import app  # planted", "stages import one way"),
        # a cycle inside one folder: fit.verdicts -> fit.engine -> fit.verdicts
        ("fit/verdicts.py", "from depthwidth.fit import engine  # planted", "no import cycles"),
    ],
)
def test_a_planted_bad_import_breaks_a_contract(tmp_path, module, line, broken):
    copy = tmp_path / "src"
    shutil.copytree(PKG, copy / "depthwidth", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    target = copy / "depthwidth" / module
    target.write_text(target.read_text() + "\n" + line + "\n")
    p = _lint_imports(copy, copy)
    assert p.returncode != 0
    assert f"{broken}" in p.stdout and "BROKEN" in p.stdout, p.stdout[-3000:]


def _modules():
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield p, ".".join(parts)


def test_no_module_imports_another_modules_private_names():
    offenders = []
    for path, mod in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("depthwidth"):
                if node.module == mod:
                    continue
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno} imports {node.module}.{a.name}")
    assert not offenders, offenders


def test_the_report_imports_no_rule_of_the_fit():
    """report/ walks the fit's result (#35): it imports nothing from the modules where verdicts are
    decided (fit/verdicts.py, the D_crit ladder included); a fit.json without them is decided by fit/result.py's
    ``Rules``, the old-file path, when report/load.py reads it (``FitDocument.from_json``)."""
    rules = ("depthwidth.fit.verdicts",)
    offenders = []
    for path, mod in _modules():
        if not mod.startswith("depthwidth.report"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n.startswith(rules) for n in names):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, offenders


def test_no_module_is_over_the_ceiling():
    long = {str(p.relative_to(REPO)): n for p, _ in _modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_every_stage_is_a_folder_and_the_package_root_holds_no_stage_module():
    top = sorted(p.name for p in PKG.iterdir() if p.suffix == ".py")
    assert top == ["__init__.py", "__main__.py"]
    stages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert {
        "core",
        "config",
        "model",
        "data",
        "train",
        "track",
        "sweep",
        "launch",
        "fit",
        "report",
        "cli",
        "simulate",
    } <= stages


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["status", "--help"],
        ["fit", "--help"],
        ["report", "--help"],
        ["sweep", "demo", "--dry-run"],
        ["simulate", "demo", "--root", "ROOT", "--json"],
    ],
)
def test_light_commands_do_not_import_torch(argv, tmp_path):
    code = (
        "import sys\nfrom depthwidth.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    argv = [str(tmp_path) if a == "ROOT" else a for a in argv]
    p = subprocess.run([sys.executable, "-c", code, *argv], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]


def test_library_api_is_importable_without_torch():
    code = (
        "import sys\nfrom depthwidth.sweep import plan, submit\nfrom depthwidth.fit import fit\n"
        "from depthwidth.report import build\nfrom depthwidth.train import train\n"
        "from depthwidth.launch import status\n"
        "assert 'torch' not in sys.modules\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]


def test_the_fast_tier_lists_only_test_modules_that_exist():
    """tests/slow.txt names whole modules for `make test-fast` to leave out: a renamed module must not
    slip back into the fast tier unnoticed."""
    from tests.conftest import _slow_tests

    slow = _slow_tests()
    assert len(slow) >= 20 and all((REPO / m).is_file() and m.startswith("tests/") for m in slow), slow
