"""Dry runs at scale: the memory plan reads a run of equal widths as two blocks (memory.shape_counts)
and must give exactly the bytes of every tensor listed one by one (accounting.param_shapes), for every
shape family and option that changes a block; the 10,000-configuration timing is benchmarks/bench_sweep.py."""

from __future__ import annotations

import math

import pytest

from depthwidth.config.compose import compose
from depthwidth.model.accounting import param_shapes
from depthwidth.model.resolve import from_config
from depthwidth.train import memory

SPECS = [
    ["model=depth_delusion", "model.depth=40", "model.width=256"],
    ["model=depth_delusion", "model.depth=3", "model.width=512"],
    ["model=vwt", "model.depth=12", "model.width=256", "model.shape=x"],
    ["model=vwt", "model.depth=9", "model.width=256", "model.shape=diamond", "model.resize=proj"],
    ["model=vwt", "model.depth=8", "model.width=128", "model.mlp=moe", "model.n_experts=4", "model.top_k=2"],
    ["model=depth_delusion", "model.depth=6", "model.width=128", "model.stabiliser=normformer"],
    ["model=depth_delusion", "model.depth=6", "model.width=128", "model.stabiliser=rezero", "model.tied=true"],
    ["model=depth_delusion", "model.depth=1", "model.width=64"],
]


def _one_by_one(spec, mode, world, rank):
    """The bytes of memory.static_bytes and the FSDP in-flight elements, tensor by tensor."""
    shapes = param_shapes(spec)
    if mode != "fsdp" or world == 1:
        n = sum(math.prod(s) for _, _, s in shapes)
        static = {"params": 4 * n, "grads": 4 * n, "optimizer": 8 * n + 4 * len(shapes)}
    else:
        padded = mine = 0
        for _, _, s in shapes:
            d0, row = (s[0], math.prod(s[1:])) if s else (1, 1)
            c = -(-d0 // world)
            padded += c * row
            mine += max(0, min(c, d0 - rank * c)) * row
        static = {"params": 4 * padded, "grads": 4 * padded, "optimizer": 8 * mine + 4 * len(shapes)}
    units: dict = {}
    for u, _, s in shapes:
        units[u] = units.get(u, 0) + math.prod(s)
    blocks = sorted((v for u, v in units.items() if u != "root"), reverse=True)
    return static, sum(blocks[:2]) + units.get("root", 0)


@pytest.mark.parametrize("ovr", SPECS, ids=lambda o: " ".join(o[1:]))
@pytest.mark.parametrize("mode,world,rank", [("single", 1, 0), ("fsdp", 8, 0), ("fsdp", 8, 7), ("fsdp", 3, 2)])
def test_runs_of_equal_widths_give_the_bytes_of_every_tensor(ovr, mode, world, rank):
    spec = from_config(compose(ovr).model)
    static, in_flight = _one_by_one(spec, mode, world, rank)
    assert memory.static_bytes(spec, mode, world, rank) == static
    want = 2 * 4 * in_flight if mode == "fsdp" else 0
    assert memory.compute_bytes(spec, mode, world, "fp32", "cpu") == want
    assert sum(k for _, _, k in memory.shape_counts(spec)) == len(param_shapes(spec))


@pytest.mark.parametrize("ovr", SPECS, ids=lambda o: " ".join(o[1:]))
def test_vwt_params_read_by_layer_class_are_the_layer_by_layer_sum(ovr):
    """figures() sums one layer of each class (spec.layer_classes) where that float equals the
    layer-by-layer sum: the same number, bit for bit, for every family and option."""
    from depthwidth.model import shapes
    from depthwidth.model.figures import figures

    spec = from_config(compose(ovr).model)
    terms = (
        shapes.moe_terms(spec.n_experts, spec.expert_hidden / spec.embed_width)
        if spec.mlp == "moe"
        else shapes.DENSE_TERMS
    )
    want = shapes.vwt_params(spec.widths, spec.embed_width, spec.vocab_size, terms)
    assert figures(spec, 64)["params_vwt"] == want
    wide = (1 << 20,) * 10_000  # a sum past 2**53: read layer by layer, as it always was
    assert shapes.vwt_params(wide, 1 << 20, 7, classes=((0, 1), (1, 9_999))) == shapes.vwt_params(wide, 1 << 20, 7)


def test_a_spec_hashes_as_its_dataclass_once_and_never_pickles_the_hash():
    import dataclasses
    import pickle

    spec = from_config(compose(SPECS[0]).model)
    assert hash(spec) == hash(tuple(getattr(spec, f.name) for f in dataclasses.fields(spec) if f.compare))
    assert "_hash" in spec.__dict__
    back = pickle.loads(pickle.dumps(spec))
    assert back == spec and "_hash" not in back.__dict__ and hash(back) == hash(spec)


def test_each_composed_config_is_its_own():
    """compose_parts copies one cached base per group choice: a run that changes its config (the sweep
    sets train.tokens and train.precision) changes no other run's."""
    from depthwidth.config.compose import compose_parts

    groups = {"model": "depth_delusion", "data": "slimpajama"}
    a = compose_parts(groups, {"model.depth": 3})
    a.train.tokens = 123
    a.optim.betas.append(0.5)
    b = compose_parts(groups, {"model.depth": 4})
    assert b.train.tokens is None and len(b.optim.betas) == 2 and b.model.depth == 4
