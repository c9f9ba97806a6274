"""A typo in a key, a group option, a sweep or a sweep-file key: one line that names the
closest real spelling (never the old "+train.step=..." that steered toward keeping the typo,
never Hydra's search path), the same in ``dw train`` (Hydra) and ``dw sweep`` (dw's composer)."""

import pytest

from depthwidth.core.errors import BadInput, did_you_mean
from tests.helpers import assert_bad_input, dw_in_process, run_dw


@pytest.mark.parametrize(
    "override, said",
    [
        ("train.step=5", "unknown config key 'train.step': did you mean train.steps?"),
        ("model.dept=4", "unknown config key 'model.dept': did you mean model.depth?"),
        ("modl.depth=3", "unknown config key 'modl.depth': did you mean model.depth?"),
        ("data=memap", "unknown data 'memap': did you mean memmap? (available: memmap, pydoc, slimpajama, synthetic)"),
        ("model=vwtt", "unknown model 'vwtt': did you mean vwt? (available: "),
    ],
)
def test_train_and_sweep_name_the_closest_spelling(capsys, override, said):
    rc, _, err = dw_in_process(capsys, "train", override)
    assert rc == 2 and err.strip().splitlines() == [err.strip()] and said in err, err
    assert "search path" not in err and "+train" not in err
    rc, _, err = dw_in_process(capsys, "sweep", "demo", override, "--dry-run")
    assert rc == 2 and said in err, err  # the dry run's composer says the same words


def test_a_key_with_no_close_spelling_lists_its_parents_keys():
    from depthwidth.config.compose import compose

    with pytest.raises(BadInput) as e:
        compose(["train.zzzqq=1"])
    msg = str(e.value)
    assert msg.startswith("unknown config key 'train.zzzqq' (keys of train: steps, tokens, ")
    assert "did you mean" not in msg


def test_adding_a_key_that_is_a_typo_still_gets_the_suggestion():
    from depthwidth.config.compose import compose
    from depthwidth.config.check import check

    with pytest.raises(BadInput, match=r"^unknown setting train\.step: did you mean train\.steps\? \(allowed: "):
        check(compose(["+train.step=5"]))


def test_sweeps_and_sweep_file_keys(tmp_path, monkeypatch):
    from depthwidth.sweep.file import load_file, points

    line = assert_bad_input(run_dw("sweep", "dmo", "--dry-run"))
    assert line.startswith("dw: error: unknown sweep 'dmo': did you mean demo? (available: demo, ")
    (tmp_path / "mine.yaml").write_text("fixd: {model.depth: 2}\n")
    (tmp_path / "blk.yaml").write_text("blocks:\n  - label: a\n    axis: {model.depth: [1, 2]}\n")
    monkeypatch.setenv("DW_SWEEPS", str(tmp_path))
    with pytest.raises(BadInput, match=r"^sweep mine: unknown key 'fixd': did you mean fixed\? \(allowed: "):
        load_file("mine")
    with pytest.raises(BadInput, match=r"^sweep blk: block 1: unknown key 'axis': did you mean axes\? \(allowed: "):
        points("blk", load_file("blk"))


def test_did_you_mean_only_for_a_close_word():
    assert did_you_mean("stpes", ["steps", "tokens"]) == "did you mean steps? "
    assert did_you_mean("zzz", ["steps", "tokens"]) == ""
