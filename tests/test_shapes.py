"""Width schedules: the reference widths, the matching conventions, bad input."""

import json

import pytest

from depthwidth.model import shapes
from depthwidth.core.errors import BadInput
from tests.helpers import assert_bad_input, dw

# docs/science.md §2: reference ×-shape at 200M (V = 100263, h 640, L 16, k 12, ρ 0.3).
REF_200M = [1152, 960, 832, 704, 608, 512, 448, 352, 320, 256, 224, 192, 288, 480, 736, 1152]


def test_reference_x_widths_exact():
    assert shapes.schedule("x", 640, 16, ratio=0.3, turn=12, match="vwt") == REF_200M
    # k defaults to 0.75·L = 12 and the symbol alias means the same family
    assert shapes.schedule("×", 640, 16) == REF_200M


def test_cli_json_reference_widths():
    p = dw("shapes", "x", "--width", "640", "--depth", "16", "--vocab", "100263", "--match", "vwt", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["widths"] == REF_200M
    assert all(isinstance(w, int) for w in out["widths"])
    assert out["turn"] == 12 and out["family"] == "x"
    # the ×-shape has fewer attention FLOPs and less KV cache than uniform (Jensen)
    assert out["shaped"]["kv_bytes_per_token"] < out["uniform"]["kv_bytes_per_token"]
    assert out["shaped"]["mean_width"] < 640


def _vwt_target(h, L, V):
    return 2 * V * h + 16 * L * h * h


@pytest.mark.parametrize("family", ["increasing", "decreasing", "diamond", "x"])
@pytest.mark.parametrize("h,L", [(640, 16), (960, 24), (1536, 24)])
def test_vwt_matching_and_narrowest(family, h, L):
    w = shapes.schedule(family, h, L, ratio=0.3, quantum=32, match="vwt")
    assert len(w) == L and all(x % 32 == 0 and x > 0 for x in w)
    # matched before rounding; rounding to 32 moves the count by well under 3%
    V = 100263
    assert abs(shapes.vwt_params(w, h, V) - _vwt_target(h, L, V)) / _vwt_target(h, L, V) < 0.03
    # the narrowest layer is ρ·h up to rounding
    assert abs(min(w) - 0.3 * h) <= 16 + 1


def test_family_geometry():
    L, h = 24, 960
    inc = shapes.schedule("increasing", h, L)
    dec = shapes.schedule("decreasing", h, L)
    dia = shapes.schedule("diamond", h, L)
    x = shapes.schedule("x", h, L)
    assert inc == sorted(inc) and inc[0] == min(inc)
    assert dec == sorted(dec, reverse=True) and dec == inc[::-1]
    k_dia, k_x = shapes.default_turn("diamond", L), shapes.default_turn("x", L)
    assert (k_dia, k_x) == (12, 18)
    assert dia.index(max(dia)) == k_dia - 1 and dia[0] == dia[-1] == min(dia)
    assert x.index(min(x)) == k_x - 1 and x[0] == x[-1] == max(x)


def test_mean_width_of_x_is_about_089h():
    # docs/science.md §2: mean width ≈ 0.89·h at every size
    for h, L in [(640, 16), (960, 24), (1536, 24), (2048, 32)]:
        w = shapes.schedule("x", h, L)
        assert 0.86 < shapes.mean_width(w) / h < 0.92


def test_asymmetric_x_shares_one_log_rate():
    w = shapes.schedule("x", 960, 24, symmetric=False, quantum=1)
    assert w[0] != w[-1]
    assert w.index(min(w)) == 17


def test_uniform_and_ratio_one_are_flat():
    assert shapes.schedule("uniform", 512, 6) == [512] * 6
    assert shapes.schedule("x", 512, 6, ratio=1.0) == [512] * 6


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(family="x", width=640, depth=16, ratio=0.0), "ratio"),
        (dict(family="x", width=640, depth=16, ratio=1.5), "ratio"),
        (dict(family="x", width=640, depth=16, turn=0), "turn"),
        (dict(family="x", width=640, depth=16, turn=17), "turn"),
        (dict(family="x", width=640, depth=16, turn=16), "turn"),
        (dict(family="x", width=640, depth=0), "depth"),
        (dict(family="spiral", width=640, depth=16), "family"),
        (dict(family="x", width=64, depth=8, ratio=0.1), "width of layer"),
    ],
)
def test_bad_input_raises(kwargs, needle):
    fam = kwargs.pop("family")
    with pytest.raises(BadInput) as e:
        shapes.schedule(fam, **kwargs)
    assert needle in str(e.value)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["x", "-w", "650", "-d", "16"], "multiple of the head count 16"),
        (["x", "-w", "640", "-d", "0"], "depth"),
        (["x", "-w", "640", "-d", "16", "--ratio", "0"], "ratio"),
        (["x", "-w", "640", "-d", "16", "--ratio", "1.2"], "ratio"),
        (["spiral", "-w", "640", "-d", "16"], "family"),
        (["x", "-w", "640", "-d", "16", "--turn", "17"], "turn"),
        (["x", "-w", "640", "-d", "16", "--turn", "0"], "turn"),
        (["x", "-w", "64", "-d", "8", "--ratio", "0.1"], "width of layer"),
        (["x", "-w", "640", "-d", "16", "--match", "approx"], "match"),
        (["x", "-w", "640", "-d", "16", "--preset", "nope"], "model"),
        (["x", "-w", "640", "-d", "16", "--nope"], "--nope"),
    ],
)
def test_cli_bad_input_exit_2_one_line(args, needle):
    line = assert_bad_input(dw("shapes", *args))
    assert needle in line


@pytest.mark.parametrize("preset", ["vwt", "depth_delusion"])
@pytest.mark.parametrize("family", ["increasing", "decreasing", "diamond", "x"])
def test_exact_matching_within_half_percent_of_uniform(preset, family):
    """`exact` matches the built model's true total (every tensor) within 0.5%."""
    from omegaconf import OmegaConf

    from depthwidth.model import accounting
    from depthwidth.config.compose import load_group
    from depthwidth.model.resolve import from_config

    m = OmegaConf.to_container(load_group("model", preset))
    m.update(vocab_size=50257, depth=24, width=1024, match="exact", widths=None)
    uni = accounting.count_params(from_config({**m, "shape": "uniform"}))["total"]
    spec = from_config({**m, "shape": family})
    assert len(set(spec.widths)) > 1
    assert abs(accounting.count_params(spec)["total"] - uni) / uni <= 0.005


def test_symmetric_ends_round_alike():
    # the far end's multiplier used to come out as 1 ± 1e-16 and round the other way
    w = shapes.schedule("x", 768, 16, quantum=64)
    assert w[0] == w[-1]
    for h, L, q in [(768, 16, 64), (512, 12, 32), (1000, 20, 8)]:
        for fam in ("x", "diamond"):
            ws = shapes.schedule(fam, h, L, quantum=q)
            assert ws[0] == ws[-1]


def test_exact_matching_never_breaks_the_shape():
    """Where rounding cannot meet 0.5%, exact matching fails with the quantum to lower."""
    from omegaconf import OmegaConf

    from depthwidth.config.compose import load_group
    from depthwidth.model.resolve import from_config

    m = OmegaConf.to_container(load_group("model", "depth_delusion"))
    m.update(vocab_size=512, depth=6, width=512, ratio=0.3, match="exact", widths=None, shape="diamond")
    spec = from_config(m)  # best effort, with a warning naming the quantum
    assert "model.quantum" in spec.extra["warning"] and spec.widths[0] == spec.widths[-1]
    with pytest.raises(BadInput) as e:  # the strict form, for callers that need the 0.5%
        shapes.schedule(
            "diamond", 512, 6, quantum=64, match="exact", count=lambda ws: sum(12 * w * w for w in ws) + 2 * 512 * 512
        )
    assert "quantum" in str(e.value)
    m.update(depth=12, ratio=0.5, shape="x")
    spec = from_config(m)
    w = spec.widths
    k = shapes.default_turn("x", 12)
    assert w[0] == w[-1] and w[k - 1] == min(w)  # the bottleneck at the turn (ties from rounding allowed)
