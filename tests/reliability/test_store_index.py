"""The manifest is the index of a run store (issue 38, items 1 and 2).

A copy of a run folder (``cp -a RUN RUN.bak``) or a run folder the manifest does not know is named
in one warning line and never counted: the run table, ``dw fit``, ``dw report`` and ``dw status`` see
exactly the manifest's runs, one record per run id.  A manifest whose ``run_dir`` points outside the
store (edited or corrupt) sends no command outside it: ``dw clean`` refuses in one line and deletes
nothing, in the store or outside it.  Stores of planted runs (``dw simulate``): no training."""

from __future__ import annotations

import json
import shutil

import pytest

from depthwidth.simulate import simulate
from depthwidth.track.run_source import run_table
from tests.helpers import dw_in_process


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The demo sweep's 16 runs, planted (3 budget points each), in ROOT/S."""
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    simulate("demo", name="S", root=tmp_path, seed=1)
    return tmp_path / "S"


def _runs(store):
    return sorted(p.name for p in store.iterdir() if (p / "summary.json").is_file())


def test_a_copied_run_folder_and_an_unknown_run_are_named_once_and_never_counted(store, capsys, ledger):
    runs = _runs(store)
    want = run_table(store)
    assert len(want) == 48 and want["run"].nunique() == 16
    shutil.copytree(store / runs[0], store / f"{runs[0]}.bak")  # cp -a RUN RUN.bak
    other = store / "f00dfeedf00d"  # a run folder from elsewhere, not in the manifest
    shutil.copytree(store / runs[1], other)
    s = json.loads((other / "summary.json").read_text())
    (other / "summary.json").write_text(json.dumps({**s, "run_id": other.name}))

    got = run_table(store)
    assert len(got) == 48 and got["run"].nunique() == 16 and not got.duplicated(["run", "tokens"]).any()
    assert got.attrs["not_counted"] == sorted([other.name, f"{runs[0]}.bak"])

    code, out, err = dw_in_process(capsys, "fit", "S", "--law", "depth-delusion", "--bootstrap", "0", "--json")
    assert code == 0, err
    doc = json.loads(out)
    fit = run_table(store)
    uniform = fit[fit["shape"] == "uniform"]
    assert (doc["n"], doc["n_runs"]) == (len(uniform), uniform["run"].nunique()) == (36, 12)
    warned = [ln for ln in err.splitlines() if "not counted" in ln]
    assert len(warned) == 1 and f"{runs[0]}.bak" in warned[0] and other.name in warned[0]

    code, out, err = dw_in_process(capsys, "status", "S", "--json")
    st = json.loads(out)
    assert code == 0 and st["total"] == 16 and st["counts"]["done"] == 16
    assert sum("not counted" in p for p in st["problems"]) == 1

    code, out, err = dw_in_process(capsys, "report", "S", "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    assert rep["runs"] == 16 and rep["states"] == {"done": 16}
    assert sum("not counted" in n for n in rep["notes"]) == 1
    ledger(faults=2, recovered=0, lost=48 - len(got), duplicates=len(got) - 48 + int(doc["n"]) - 36)


def test_a_manifest_pointing_outside_the_store_makes_clean_refuse_and_delete_nothing(store, tmp_path, capsys, ledger):
    runs = _runs(store)
    for rid in runs:  # every done run has two checkpoints to free
        for step in (10, 20):
            d = store / rid / "ckpt" / f"step_{step:08d}"
            d.mkdir(parents=True)
            (d / "__0_0.distcp").write_bytes(b"x" * 4096)
    away = tmp_path / "elsewhere" / "precious"
    (away / "ckpt" / "step_00000010").mkdir(parents=True)
    (away / "ckpt" / "step_00000010" / "__0_0.distcp").write_bytes(b"y" * 4096)
    events = [json.loads(x) for x in (store / "manifest").read_text().splitlines()]
    events[0]["run_dir"] = str(away)  # an edited (or corrupt) manifest
    (store / "manifest").write_text("".join(json.dumps(e) + "\n" for e in events))

    def files():
        return sorted(p for p in tmp_path.rglob("*.distcp"))

    before = files()
    for argv in (["clean", "S", "--keep", "none", "--force"], ["clean", "S"]):
        code, out, err = dw_in_process(capsys, *argv)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
        assert str(away) in lines[0] and f"{store / events[0]['run_id']}" in lines[0]
    assert files() == before  # nothing deleted: neither outside the store nor in it

    code, out, _ = dw_in_process(capsys, "status", "S", "--json")
    problems = json.loads(out)["problems"]
    assert code == 0 and any(str(away) in p and "refuse" in p for p in problems)
    ledger(faults=1, recovered=0, lost=len(before) - len(files()), duplicates=0)

    events[0]["run_dir"] = str(store / events[0]["run_id"])  # the manifest repaired: clean works again
    (store / "manifest").write_text("".join(json.dumps(e) + "\n" for e in events))
    code, out, err = dw_in_process(capsys, "clean", "S", "--keep", "none", "--force")
    assert code == 0, err
    assert files() == [away / "ckpt" / "step_00000010" / "__0_0.distcp"]  # only the store's own, all of them
