"""The CLI's contract: light imports, exit codes, help with examples."""

import subprocess
import sys

from tests.helpers import REPO, dw, run_dw

HEAVY = ("torch", "pandas", "scipy", "matplotlib", "wandb", "submitit")


def _modules_after(argv):
    code = (
        "import sys\n"
        "from depthwidth.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('MODULES:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("MODULES:")][-1]
    return line[len("MODULES:") :]


def test_help_imports_nothing_heavy():
    assert _modules_after(["--help"]) == ""


def test_shapes_does_not_import_torch():
    loaded = _modules_after(["shapes", "x", "--width", "640", "--depth", "16", "--json"])
    assert "torch" not in loaded.split(",")


def test_every_command_help_has_an_example():
    import typer

    from depthwidth.cli import app

    assert run_dw("--help").returncode == 0

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, path + [name])
        else:
            yield path

    paths = list(walk(typer.main.get_command(app), []))
    assert ["shapes"] in paths
    for path in paths:
        h = dw(*path, "--help")  # in-process: the real entry point is the --help above
        assert h.returncode == 0, path
        assert "Example" in h.stdout or "example" in h.stdout, path


def test_unknown_command_is_bad_input():
    p = run_dw("frobnicate")
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1
