"""Every fit states what it rests on, and whether its claim-carrying parameter is identified."""

import pytest

from depthwidth.fit.verdicts import identification, meaningful_optimum
from depthwidth.fit.laws import get_law
from depthwidth.fit.pipeline import run_fit
from tests.planted import PLANTED, planted_table

DD = get_law("depth-delusion")


def _fit(df, law="depth-delusion", **kw):
    return run_fit(runs=df, law=law, bootstrap=0, max_starts=200, write=False, **kw)  # no intervals needed here


def test_dcrit_located_when_its_interval_is_pinned_inside_the_grid():
    df = planted_table(DD, PLANTED["depth-delusion[log]"], noise=0.005, seed=2)
    ident = run_fit(runs=df, law="depth-delusion", bootstrap=100, max_starts=200, write=False)["identification"]
    assert ident["points"] == len(df) == 189 and ident["runs"] == 63
    assert ident["ranges"]["depth"] == [2.0, 64.0] and ident["ranges"]["width"] == [64.0, 4096.0]
    assert ident["ranges"]["loss"] == [df["loss"].min(), df["loss"].max()]
    assert ident["ranges"]["flops"] == [df["flops"].min(), df["flops"].max()]
    c = ident["claim"]
    # planted kappa = 2.43: D_crit = 10.1 at W = 64 .. 20.2 at W = 4096; depths 12.. are beyond at W = 64
    assert c["identified"] and c["runs_beyond"] >= 2 and c["runs_within"] >= 2
    assert c["points_beyond"] + c["points_within"] == 189
    assert ident["verdict"] == "located" and ident["line"].startswith("D_crit located: D_crit(W) pinned at ")
    for w, r in ident["widths"].items():  # the rule, width by width
        lo, hi = r["interval"]
        assert r["verdict"] == "located" and r["depths"] == [2.0, 64.0]
        assert 2.0 <= lo <= r["value"] <= hi <= 64.0 and hi / lo <= ident["max_ratio"]
    assert ident["sign"]["settled"] and "assumed" in ident["sign"]["because"]  # the log form's sign is its own
    assert ident["optimum"] and all(v["identified"] for v in ident["optimum"].values())  # a located claim's


def test_dcrit_is_never_located_without_an_interval():
    df = planted_table(DD, PLANTED["depth-delusion[log]"], noise=0.005, seed=2)
    ident = _fit(df)["identification"]  # --bootstrap 0
    assert ident["verdict"] == "not-located" and not ident["claim"]["identified"]
    assert {r["because"] for r in ident["widths"].values()} == {"no interval (--bootstrap 0, or it was withheld)"}
    # the optima are derived from that D_crit: none is identified either, in fit.json as in the caveat
    why = "derived from D_crit, which the fit does not identify"
    assert ident["optimum"] and all(
        v == {"value": None, "identified": False, "because": why} for v in ident["optimum"].values()
    )


def test_a_width_not_located_names_the_simultaneous_band_it_rests_on():
    """The rung rests on the sup-t band over the grid's widths (symmetric in log D_crit), not on the
    D_crit table's per-width percentile interval: the line names which it prints."""
    df = planted_table(DD, PLANTED["depth-delusion[log]"], noise=0.1, seed=2)
    ident = run_fit(runs=df, law="depth-delusion", bootstrap=100, max_starts=200, write=False)["identification"]
    assert ident["verdict"] == "not-located"
    for r in ident["widths"].values():
        assert r["because"].startswith("its 95% simultaneous band [") and r["interval"] is not None


def test_no_penalty_when_no_run_is_deeper():
    df = planted_table(DD, PLANTED["depth-delusion[log]"], noise=0.005, seed=2)
    shallow = df[df["depth"] <= 8]  # planted D_crit >= 10 at every width: the penalty never acts
    ident = _fit(shallow)["identification"]
    assert ident["ranges"]["depth"] == [2.0, 8.0]
    assert not ident["claim"]["identified"]
    assert ident["verdict"] == "no-penalty" and ident["line"].startswith("no depth penalty shown: ")
    assert all(r["verdict"] == "no-penalty" for r in ident["widths"].values())


def test_exponent_claim_and_its_interval():
    law = get_law("chinchilla")
    df = planted_table(law, PLANTED["chinchilla"], kind="chinchilla", noise=0.005)
    res = _fit(df, law="chinchilla")  # --bootstrap 0: no interval, nothing identified
    assert res["identification"]["verdict"] == "not-identified"
    assert res["identification"]["line"] == (
        "alpha and beta identified: no, because alpha has no interval (--bootstrap 0, or it was withheld); "
        "beta has no interval (--bootstrap 0, or it was withheld)"
    )
    ident = identification(df, law, res["params"], ci={"alpha": [0.3, 0.4], "beta": [0.3, 0.4]})
    assert ident["verdict"] == "identified" and ident["line"].endswith("with intervals clear of 0 and of the bounds")
    ident = identification(df, law, res["params"], ci={"alpha": [0.064, 5.0], "beta": [0.3, 0.4]})
    assert ident["line"].endswith("the interval of alpha [0.064, 5] runs to the bound 5 of the fit")
    wide = {"alpha": [-0.1, 0.6], "beta": [0.3, 0.4]}
    ident = identification(df, law, res["params"], ci=wide)
    assert ident["line"] == "alpha and beta identified: no, because the interval of alpha [-0.1, 0.6] contains 0"
    assert ident["verdict"] == "not-identified"
    ident = identification(df, law, res["params"], on_bound=["beta"], ci={"alpha": [0.3, 0.4], "beta": [0.3, 0.4]})
    assert ident["line"] == "alpha and beta identified: no, because beta is on a bound"


def test_optima_below_one_layer_are_not_numbers():
    opt = meaningful_optimum({"compute_optimal": {"D_opt": 0.54, "W_opt": 900.0}})
    assert opt["D_opt"] == {
        "value": None,
        "identified": False,
        "because": "the law's optimum D_opt = 0.54 is below one layer",
    }
    assert opt["W_opt"] == {"value": 900.0, "identified": True}
    assert meaningful_optimum({}) == {}


def test_cli_prints_what_the_fit_rests_on(tmp_path):
    from tests.helpers import run_dw

    df = planted_table(get_law("chinchilla"), PLANTED["chinchilla"], kind="chinchilla", noise=0.005)
    f = tmp_path / "t.csv"
    df.to_csv(f, index=False)
    p = run_dw("fit", "--runs", str(f), "--bootstrap", "0", "--max-starts", "50", "--no-write")
    assert p.returncode == 0, p.stderr
    assert "rests on 80 runs, 240 points; loss " in p.stdout
    assert "alpha and beta identified: no, because alpha has no interval" in p.stdout
    assert "(not written: no fit.json holds it)" in p.stdout and "(its fit.json;" not in p.stdout  # none was written


@pytest.mark.parametrize("law", ["depth-delusion", "width-depth"])
def test_every_law_states_a_claim(law):
    df = planted_table(DD, PLANTED["depth-delusion[log]"], noise=0.005, seed=2)
    ident = _fit(df, law=law)["identification"]
    assert ident["claim"]["parameter"] in ("D_crit", "a_w and a_d")
    assert isinstance(ident["claim"]["identified"], bool)


def test_cli_prints_an_optimum_below_one_layer_as_not_identified(capsys):
    from depthwidth.cli.fit import render
    from depthwidth.fit.result import FitDocument, with_verdicts

    df = planted_table(DD, PLANTED["depth-delusion[log]"], noise=0.005, seed=2)
    res = _fit(df)
    res["derived"]["compute_optimal"]["D_opt"] = 0.54  # what the demo's fit reported
    res["identification"]["optimum"] = meaningful_optimum(res["derived"])
    render(FitDocument.from_json(with_verdicts(res)))  # decided again, as dw fit decides them
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "D_opt at C" in line)
    assert "not identified" in row and "0.54" not in row
    assert "D_opt: not identified (the law's optimum D_opt = 0.54 is below one layer)" in out
