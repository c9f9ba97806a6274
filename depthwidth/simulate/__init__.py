"""``dw simulate``: a planted world written as an ordinary run store, so everything downstream
(``dw status``, ``dw fit``, ``dw report``) runs unchanged on known truth.

    from depthwidth.simulate import simulate
    s = simulate("depth_delusion", law="depth-delusion", dcrit="log", seed=3)   # runs/depth_delusion-sim
    s["truth"]["dcrit[W=512]"], s["dir"], s["runs"]

It answers "would this grid identify D_crit at all?" before anything is
trained: plan the sweep file (every run validated as ``dw sweep --dry-run``
does; no data, no torch), give every run its planted losses at its token
budgets (the sweep's own, or ``budgets`` as fractions of each run's tokens),
and write the store (simulate/store.py).  The world — law, parameters, noise —
is simulate/world.py.  A store of simulated runs is marked in every
provenance block; ``dw fit`` compares its fit with the planted truth and
``dw report`` refuses a store that mixes simulated and trained runs.

Milliseconds per run: the 30-run depth_delusion grid is written in well
under a second (benchmarks/bench_calibration.py times it).

Modules: plant.py (``simulate``: plan, plant, write), world.py (the world), store.py (the store),
options.py (``dw simulate``'s options, standard library only).  The names below are imported on
first use: ``dw --help`` reads options.py without numpy.
"""

__all__ = ["simulate", "world", "Noise", "World", "WORLD_FILE", "parse_budgets", "truth"]


def __getattr__(name: str):
    if name in __all__:
        from depthwidth.simulate import plant

        return getattr(plant, name)
    raise AttributeError(f"module 'depthwidth.simulate' has no attribute {name!r}")
