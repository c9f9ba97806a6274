"""The documentation (#39): the README is an entry point, the references are generated from the code
and up to date, every command's --help runs and its examples are real command lines, and the
architecture page names what the package holds.

``mkdocs build --strict`` (every link, anchor and page of the site) runs in ``make lint``.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers import dw_in_process

ROOT = Path(__file__).resolve().parents[1]


def _gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen_docs = _gen_docs()


# -- the README ------------------------------------------------------------------------------------


def test_the_readme_is_short_and_starts_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: at most 200 (the rest belongs on the site, docs/)"
    first = [line.strip() for line in lines[1:6] if line.strip()]
    assert first[0].startswith("make demo") and first[1].startswith("make test"), first
    text = "\n".join(lines)
    assert text.index("GPU") < text.index("## "), "the GPU install comes right after the two commands"
    assert text.count("<!-- demo:begin -->") == 1 and text.count("<!-- demo:end -->") == 1  # make readme-demo
    assert text.count("![") == 1, "one figure"


def test_every_link_of_the_readme_resolves():
    text = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path = target.split("#")[0]
        assert (ROOT / path).exists(), f"README links to {target}, which does not exist"


# -- the generated references ----------------------------------------------------------------------


def test_the_references_are_generated_from_the_code_and_up_to_date():
    pages = gen_docs.generate()
    assert set(pages) == {"cli.md", "settings.md", "sweep-file.md", "fit-json.md"}
    for name, text in pages.items():
        path = ROOT / "docs" / "reference" / name
        assert path.is_file() and path.read_text() == text, (
            f"docs/reference/{name} is stale: run `python scripts/gen_docs.py` (or `make docs`)"
        )


def test_the_references_hold_every_command_setting_sweep_key_and_fit_key():
    from depthwidth.config.docs import rows
    from depthwidth.config.schema import ALL_GROUPS
    from depthwidth.fit.result import FitDocument, Verdicts
    from depthwidth.sweep import file as sweep_file

    ref = ROOT / "docs" / "reference"
    cli = (ref / "cli.md").read_text()
    for name, cmd in gen_docs.commands():
        assert f"## `{name}`" in cli, name
        for p in cmd.params:
            for opt in p.opts if p.opts[0].startswith("-") else []:
                assert f"`{opt}`" in cli, (name, opt)
    settings = (ref / "settings.md").read_text()
    for g in ALL_GROUPS:
        for r in rows(g):
            assert f"`{r['key']}" in settings, r["key"]
    sweep = (ref / "sweep-file.md").read_text()
    for k in {*sweep_file.TOP_KEYS, *sweep_file.BLOCK_KEYS, *sweep_file.POINT_META}:
        assert f"| `{k}` |" in sweep, k
    fit = (ref / "fit-json.md").read_text()
    import dataclasses

    for cls in (FitDocument, Verdicts):
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in fit, f.name


def test_the_generator_is_torch_free_and_fast():
    code = (
        "import sys, time, runpy; t = time.time(); "
        f"m = runpy.run_path({str(ROOT / 'scripts' / 'gen_docs.py')!r}); m['generate'](); "
        "print(time.time() - t, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys_executable(), "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    seconds, torch = out.stdout.split()
    assert torch == "False" and float(seconds) < 20, out.stdout


def sys_executable() -> str:
    import sys

    return sys.executable


# -- every command's --help and its examples -------------------------------------------------------

# Examples run here for real (DW_RUNS a temporary folder): no trained store, cluster, GPU or network.
RUN = {
    "dw shapes x -w 96 -d 6 -q 8 -H 4 --vocab 256",
    "dw shapes x --width 640 --depth 16 --vocab 100263 --match vwt",
    "dw shapes x --preset moe_1b3b",
    "dw config show model",
    "dw config show launcher.time",
    "dw config show model=vwt_1b optim=vwt",
    "dw config show model model=vwt_1b model.depth=12",
    "dw sweep depth_delusion launcher=slurm --dry-run --no-data-check",
    "dw simulate depth_delusion --law depth-delusion --dcrit log --noise 0.005 --seed 1",
    "dw simulate isoflop_depth --law width-depth --budgets 1 --name iso-sim",
}

# Why an example is not run here: the first rule that matches names it (the example is still parsed,
# so every option it uses exists and takes its value).
NOT_RUN = [
    (r"--device cuda", "needs a GPU"),
    (r"launcher=slurm(?!.*--dry-run)", "needs a SLURM cluster (tests/test_slurm*.py run it on the test cluster)"),
    (r"--source wandb|^dw sync", "needs a W&B account"),
    (r"gemstones\.jsonl", "needs the Gemstones table (not in the repository)"),
    (r"--source \S+/|--tasks (?!dw_heldout_cloze)", "needs the network (the Hub's datasets)"),
    (r"^dw (train|sweep demo)", "trains models: minutes of CPU (make demo, tests/test_train*.py)"),
    (r"^dw suggest", "a design from the prior: minutes of CPU (tests/test_design.py)"),
    (r"^dw fit depth_delusion-sim", "200 bootstrap refits of 30 runs: minutes of CPU (tests/test_simulate.py)"),
    (
        r"^dw (status|stop|forget|clean|fit|report|analyze|export|eval) ",
        "needs a trained store (make demo writes runs/demo)",
    ),
]


def examples():
    out = []
    for name, cmd in gen_docs.commands():
        for line in inspect.cleandoc(cmd.help or "").splitlines():
            s = line.strip()
            if s.startswith("Example:"):
                s = s[len("Example:") :].strip()
            elif not (line.startswith(" ") and s.startswith("dw ")):
                continue
            if s.startswith("dw "):
                out.append((name, re.split(r"\s{2,}\(|\s+>\s", s)[0].strip()))
    return out


def test_every_command_prints_its_help(capsys):
    cmds = gen_docs.commands()
    assert len(cmds) >= 17
    for name, _ in cmds:
        code, out, err = dw_in_process(capsys, *name.split()[1:], "--help")
        assert code == 0 and "Usage" in out, (name, err)


def test_every_help_example_is_a_real_command_line_run_here_or_named_why_not():
    seen = set()
    for name, line in examples():
        argv = shlex.split(line)
        assert line.startswith(name + " ") or argv[1] in ("fit", "status"), (name, line)  # simulate's help shows dw fit
        cmd = dict(gen_docs.commands())[" ".join(argv[:3]) if argv[1] in ("data", "config") else " ".join(argv[:2])]
        n = 3 if argv[1] in ("data", "config") else 2
        ctx = cmd.make_context(" ".join(argv[:n]), argv[n:])  # every option exists and takes its value
        ctx.close()
        seen.add(line)
        if line not in RUN:
            assert any(re.search(rx, line) for rx, _ in NOT_RUN), (
                f"{line!r}: run it in this test (RUN) or say why not (NOT_RUN)"
            )
    assert RUN <= seen, f"examples no longer in any --help: {sorted(RUN - seen)}"


@pytest.mark.parametrize("line", sorted(RUN))
def test_the_help_examples_that_need_nothing_more_run(line, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DW_RUNS", str(tmp_path / "runs"))
    code, out, err = dw_in_process(capsys, *shlex.split(line)[1:])
    assert code == 0, (line, err[-2000:])
    assert out.strip(), line


# -- the architecture page -------------------------------------------------------------------------


def _named() -> dict[str, list[str]]:
    """Folder -> the modules the architecture table names (backticked, outside parentheses)."""
    named = {}
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        m = re.match(r"^\| `([a-z_]+)/` \| [^|]* \| (.*) \|$", line)
        if not m:
            continue
        depth, toks = 0, []
        for tok in re.split(r"(`[^`]*`|[()])", m.group(2)):
            if tok == "(":
                depth += 1
            elif tok == ")":
                depth -= 1
            elif tok.startswith("`") and depth == 0:
                toks.append(tok.strip("`").rstrip("/"))
        named[m.group(1)] = toks
    return named


def _tracked(prefix: str = "depthwidth") -> list[Path]:
    """The package's files as committed (work in progress beside them is not yet the code)."""
    try:
        out = subprocess.run(["git", "ls-files", prefix], capture_output=True, text=True, cwd=ROOT, check=True)
        return [ROOT / f for f in out.stdout.split()]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: what is on disk
        return sorted((ROOT / prefix).rglob("*.py"))


def test_the_architecture_page_names_every_package_and_only_modules_that_exist():
    named = _named()
    pkg_root = ROOT / "depthwidth"
    for folder, mods in named.items():
        assert (pkg_root / folder / "__init__.py").is_file(), f"architecture.md names {folder}/, not a package"
        for mod in mods:
            assert (pkg_root / folder / f"{mod}.py").is_file() or (pkg_root / folder / mod / "__init__.py").is_file(), (
                f"architecture.md names {folder}/{mod}, which does not exist"
            )
    packages = {
        f.parent.relative_to(pkg_root).parts for f in _tracked() if f.name == "__init__.py" and f.parent != pkg_root
    }
    for parts in packages:
        top = parts[0]
        assert top in named, f"depthwidth/{top}/ has no row in docs/architecture.md"
        if len(parts) > 1:
            assert parts[-1] in named[top], f"depthwidth/{'/'.join(parts)}/ is not named in {top}/'s row"


def test_the_architecture_page_names_every_module_committed_today():
    """Not only the packages: the modules too, as of this page's writing (a module added later needs
    its row entry; the failure says which)."""
    named = _named()
    pkg_root = ROOT / "depthwidth"
    missing = []
    for f in _tracked():
        rel = f.relative_to(pkg_root)
        if f.suffix != ".py" or len(rel.parts) != 2 or f.stem in ("__init__", "__main__"):
            continue
        if f.stem not in named.get(rel.parts[0], []):
            missing.append(str(rel))
    assert not missing, f"modules without a mention in docs/architecture.md: {missing}"
