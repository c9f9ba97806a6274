"""The report's "inside the models" section, from each run's analysis.json (``dw analyze``).

One profile per width shape at matched parameters: the (h, L) group of
analysed finished runs that holds the most shapes (the demo's 96 × 6), each
per-layer measure averaged over that shape's seeds.  Two tables:

``inside``         per shape: the lowest entropy and its layer, entropy and
                   dead MLP fraction at the narrowest layer (uniform: the
                   middle layer ⌈L/2⌉, as every layer is equally narrow), mean
                   dead fraction of the middle layers, the first layer whose
                   lens CE is within 0.1 nats of the final one, the largest KL
                   between consecutive layers.
``inside_claims``  the Variable-Width paper's qualitative claims beside these
                   numbers, each with a plain verdict: supported / not
                   supported / not measurable on this sweep.  A verdict rests
                   on the runs of each shape, not only their means: a
                   comparison is supported when a one-sided permutation test
                   over the runs puts it beyond seed scatter (5%), which takes
                   3 runs of each shape; with fewer it is not measurable.

"Middle layers" are layers 2..L−1 (none when L < 3).  No torch here.
"""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

from depthwidth.measure import doc as adoc
from depthwidth.core.tables import Col, Table
from depthwidth.report.document import SHAPES

CONVERGED_NATS = 0.1  # lens CE within this of the final layer's: "the answer is there"
DEAD_GAP = 0.01  # "more dead units" needs at least 1% of the units more: one seed's few units are not a finding
VALLEY_NEAR_ZERO = 0.2  # a middle-layer entropy at or below this is a compression valley
SUPPORTED, REFUTED, UNMEASURABLE = "supported", "not supported", "not measurable on this sweep"
# A claim is "supported" only beyond seed scatter: one-sided tests over the runs at this level (a difference of
# means alone said "supported" of a × model planted identical to uniform in 41-62% of tables:
# benchmarks/bench_verdicts.py, kind ``inside``)
LEVEL = 0.05
RUNS_NEEDED = 3  # runs of each shape the permutation test needs to reach LEVEL (1/C(6, 3) = 0.05)
EXACT_SPLITS = 20_000
SPLIT_DRAWS = 20_000


def read_analyses(sweep_dir, runs: list[dict]) -> list[dict]:
    """{run, shape, depth, width, doc} for every run of the sweep with an analysis.json."""
    out = []
    for r in runs:
        d = adoc.read(Path(sweep_dir) / str(r["run"]))
        if d is not None:
            out.append(
                {
                    "run": r["run"],
                    "state": r["state"],
                    "shape": r["shape"] or "uniform",
                    "depth": r["depth"],
                    "width": r["width"],
                    "doc": d,
                }
            )
    return out


def group_docs(analyses: list[dict]) -> tuple[tuple | None, dict]:
    """((h, L), {shape: [analysis docs]}) of the best-covered group of finished runs."""
    done = [a for a in analyses if a["state"] == "done"]
    groups: dict = {}
    for a in done:
        groups.setdefault((a["width"], a["depth"]), {}).setdefault(a["shape"], []).append(a["doc"])
    if not groups:
        return None, {}
    key = max(groups, key=lambda k: (len(groups[k]), k[1] or 0, k[0] or 0))
    return key, {s: groups[key][s] for s in sorted(groups[key], key=lambda s: SHAPES.index(s) if s in SHAPES else 99)}


def by_shape(analyses: list[dict]) -> tuple[tuple | None, dict]:
    """((h, L), {shape: {"runs", "widths", "eval_loss", KEY: per-layer mean}}) of the best-covered group."""
    key, docs_of = group_docs(analyses)
    return key, {shape: profile(docs) for shape, docs in docs_of.items()}


def profile(docs: list[dict]) -> dict:
    """{"runs", "widths", "eval_loss", KEY: per-layer mean} over the analyses of one shape."""
    prof = {
        "runs": len(docs),
        "widths": docs[0]["widths"],
        "eval_loss": sum(d["eval_loss"] for d in docs) / len(docs),
    }
    for k in adoc.LAYER_KEYS:
        cols = [adoc.column(d, k) for d in docs]
        prof[k] = [
            None if any(c[i] is None for c in cols) else sum(c[i] for c in cols) / len(cols)
            for i in range(len(cols[0]))
        ]
    return prof


def _narrowest(widths) -> int:
    """0-based index of the narrowest layer (uniform: the middle one)."""
    if len(set(widths)) == 1:
        return (len(widths) + 1) // 2 - 1
    return min(range(len(widths)), key=lambda i: widths[i])


def _middle(v):
    return v[1:-1] if len(v) >= 3 else []


def summarise(prof: dict) -> dict:
    H, dead, ce, klp = prof["entropy_prefix"], prof["mlp_dead"], prof["lens_ce"], prof["lens_kl_prev"]
    i_min = min(range(len(H)), key=lambda i: H[i])
    n = _narrowest(prof["widths"])
    conv = next(i for i in range(len(ce)) if ce[i] - ce[-1] <= CONVERGED_NATS) + 1
    mid_dead, mid_H = _middle(dead), _middle(H)
    return {
        "min_entropy": H[i_min],
        "min_entropy_layer": i_min + 1,
        "narrowest_layer": n + 1,
        "entropy_narrowest": H[n],
        "dead_narrowest": dead[n],
        "dead_middle": sum(mid_dead) / len(mid_dead) if mid_dead else None,
        "min_entropy_middle": min(mid_H) if mid_H else None,
        "lens_converged_layer": conv,
        "lens_converged_fraction": conv / len(ce),
        "max_kl_prev": max(klp[1:]) if len(klp) > 1 else None,
        "eval_loss": prof["eval_loss"],
    }


def mlp_rule(analyses: list[dict]) -> str:
    """When an MLP unit counted as active in these analyses (their ``options``), in words."""
    said = []
    for a in analyses:
        o = a["doc"].get("options") or {}
        rule = o.get("mlp_rule")
        if rule == "cett":
            txt = (
                f"SwiGLU: |a| ≥ the layer's CETT threshold ε (the units below it carry ≤ "
                f"{o.get('cett_target', 0.2):.0%} of the MLP output's norm)"
            )
        elif rule == "fixed":
            txt = f"SwiGLU: |a| above a fixed {o.get('swiglu_threshold', 1e-3):g} (older analyses: not comparable)"
        elif rule == "gelu>0" or o.get("mlp") == "gelu":
            txt = "GELU: a > 0"
        else:
            continue
        if txt not in said:
            said.append(txt)
    return "; ".join(said) or "as each analysis.json's options say"


def tables(analyses: list[dict]) -> dict:
    key, docs_of = group_docs(analyses)
    profs = {shape: profile(docs) for shape, docs in docs_of.items()}
    rows = []
    for shape, prof in profs.items():
        rows.append({"shape": shape, "width": key[0], "depth": key[1], "runs": prof["runs"], **summarise(prof)})
    cols = [
        Col("shape", "shape"),
        Col("runs", "runs"),
        Col("eval_loss", "eval loss", "{:.4f}"),
        Col("min_entropy", "min H", "{:.3f}"),
        Col("min_entropy_layer", "at layer"),
        Col("narrowest_layer", "narrowest layer"),
        Col("entropy_narrowest", "H there", "{:.3f}"),
        Col("dead_narrowest", "MLP dead there", "{:.3f}"),
        Col("dead_middle", "MLP dead, middle layers", "{:.3f}"),
        Col("lens_converged_layer", "lens CE within 0.1 of final at layer"),
        Col("max_kl_prev", "max KL(l‖l−1)", "{:.4f}"),
    ]
    title = "Inside the models: entropy, dead MLP units, logit lens per shape" + (
        f" (h = {key[0]}, L = {key[1]})" if key else ""
    )
    t = Table("inside", title, cols, rows)
    if rows:
        d0 = next(iter(profs.values()))
        t.notes.append(
            f"from analysis.json ({len(analyses)} runs analysed); H = normalised matrix entropy over "
            f"each layer's own w_i coordinates; MLP units active: {mlp_rule(analyses)}; dead: active "
            "on < 0.1% of the tokens; narrowest layer of uniform = the middle layer; middle "
            f"layers = 2..L−1; per-layer values averaged over seeds ({d0['runs']} run(s) per shape here); "
            "eval loss: the analysis's own fixed held-out tokens (the same for every run of the "
            "sweep), so it differs from the loss grid's validation loss of the same run"
        )
    else:
        t.notes.append("no analysis.json in this sweep's finished runs (run: dw analyze NAME)")
    per_run = {shape: [summarise(profile([d])) for d in docs] for shape, docs in docs_of.items()}
    return {"inside": t, "inside_claims": _claims({r["shape"]: r for r in rows}, per_run)}


def shift_p(a: list, b: list) -> float:
    """One-sided permutation test that ``a``'s runs lie above ``b``'s: the share of the ways to split
    the pooled runs into groups of their sizes whose difference of means is at least the observed
    (every split up to ``EXACT_SPLITS``, else ``SPLIT_DRAWS`` seeded ones).  Exact whatever the
    measure's distribution, ties (a layer index) included; its smallest value is 1/C(n, len(a))."""
    import itertools

    a, b = [float(v) for v in a], [float(v) for v in b]
    pool, k = a + b, len(a)
    obs = sum(a) / k - sum(b) / len(b)
    total = sum(pool)
    tol = 1e-12 * max(1.0, abs(obs))
    if math.comb(len(pool), k) <= EXACT_SPLITS:
        splits = itertools.combinations(range(len(pool)), k)
    else:
        rng = random.Random(0)
        splits = (rng.sample(range(len(pool)), k) for _ in range(SPLIT_DRAWS))
    hits = n = 0
    for idx in splits:
        sa = sum(pool[i] for i in idx)
        hits += sa / k - (total - sa) / len(b) >= obs - tol
        n += 1
    return hits / n


def smallest_p(na: int, nb: int) -> float:
    """The smallest p ``shift_p`` can give with these run counts."""
    return 1.0 / math.comb(na + nb, na) if na and nb else 1.0


def _shift(text: str, higher: list, lower: list, what: str) -> tuple[str, str]:
    """(measured text, verdict) of a claim that ``higher``'s runs lie above ``lower``'s in ``what``."""
    floor = smallest_p(len(higher), len(lower))
    if floor > LEVEL:
        return (
            text + f" ({len(lower)} and {len(higher)} run(s): too few to tell {what} from seed scatter; "
            f"{RUNS_NEEDED} runs of each can)",
            UNMEASURABLE,
        )
    p = shift_p(higher, lower)
    return text + f" (permutation test over the runs: p = {p:.2g})", SUPPORTED if p <= LEVEL else REFUTED


def _claims(s: dict, runs: dict | None = None) -> Table:
    """The paper's claims against the shapes' profiles ``s`` (means over seeds), each judged on the
    runs' own values ``runs`` ({shape: [summary per run]}): a comparison is supported only when a
    one-sided permutation test over the runs (``shift_p``) puts it beyond seed scatter at ``LEVEL``;
    a level (the valley) when its one-sided t bound is below the threshold.  With one run of a shape
    nothing is judged: one run cannot tell a difference from its seed."""
    runs = runs or {}
    u, x = s.get("uniform"), s.get("x")
    ru, rx = runs.get("uniform") or [], runs.get("x") or []
    rows = []

    def claim(text, measured, verdict):
        rows.append({"claim": text, "measured": measured, "verdict": verdict})

    def vals(rs, k):
        return [r[k] for r in rs if r.get(k) is not None]

    # 1. a compression valley in the uniform model
    valley = False
    if u is None or u["min_entropy_middle"] is None:
        claim("a uniform model's middle layers collapse to low entropy (compression valley)", "—", UNMEASURABLE)
    else:
        v, vs = u["min_entropy_middle"], vals(ru, "min_entropy_middle")
        said = f"uniform: lowest middle-layer H {v:.3f} (valley: ≤ {VALLEY_NEAR_ZERO})"
        if len(vs) < 2:
            verdict = UNMEASURABLE
            said += f" ({len(vs)} run: too few to tell a level from seed scatter; 2 or more can)"
        else:
            from scipy import stats

            sd = statistics.stdev(vs)
            top = statistics.fmean(vs) + float(stats.t.ppf(1 - LEVEL, len(vs) - 1)) * sd / math.sqrt(len(vs))
            valley = top <= VALLEY_NEAR_ZERO
            verdict = SUPPORTED if valley else REFUTED
            said += f" ({100 * (1 - LEVEL):.0f}% upper bound over {len(vs)} runs: {top:.3f})"
        claim("a uniform model's middle layers collapse to low entropy (compression valley)", said, verdict)
    both = u is not None and x is not None
    # 2. x keeps entropy up at its bottleneck
    if not both or u["min_entropy_middle"] is None:
        claim("the × model keeps entropy up where the uniform one collapses", "—", UNMEASURABLE)
    else:  # without a valley in the uniform model there is nothing for × to avoid
        said = (
            f"lowest middle-layer H: × {x['min_entropy_middle']:.3f} vs uniform {u['min_entropy_middle']:.3f}; "
            f"× at its bottleneck (layer {x['narrowest_layer']}): {x['entropy_narrowest']:.3f}"
        )
        if not valley:
            claim(
                "the × model keeps entropy up where the uniform one collapses",
                said + " (no valley shown in the uniform model)",
                UNMEASURABLE,
            )
        else:
            hi, lo = vals(rx, "min_entropy_middle"), vals(ru, "min_entropy_middle")
            claim("the × model keeps entropy up where the uniform one collapses", *_shift(said, hi, lo, "it"))
    # 3. dead MLP units in the uniform middle layers, fewer in x
    if not both or u["dead_middle"] is None:
        claim("uniform middle layers have more dead MLP units than the × model's", "—", UNMEASURABLE)
    else:
        gap = u["dead_middle"] - x["dead_middle"]
        said = f"dead fraction, middle layers: uniform {u['dead_middle']:.3f}, × {x['dead_middle']:.3f}"
        if 0 < gap < DEAD_GAP:
            claim(
                "uniform middle layers have more dead MLP units than the × model's",
                said + f" (a gap under {DEAD_GAP:.0%} of the units)",
                UNMEASURABLE,
            )
        else:
            res = _shift(said, vals(ru, "dead_middle"), vals(rx, "dead_middle"), "the gap")
            claim("uniform middle layers have more dead MLP units than the × model's", *res)
    # 4./5. logit lens: x converges earlier and more smoothly
    if not both:
        claim("the × model's logit lens reaches the final answer at an earlier layer", "—", UNMEASURABLE)
        claim("the × model's prediction changes more smoothly between layers", "—", UNMEASURABLE)
    else:
        said = (
            f"first layer within {CONVERGED_NATS} nats of the final CE: × {x['lens_converged_layer']}, "
            f"uniform {u['lens_converged_layer']} (of {u['depth']})"
        )
        res = _shift(said, vals(ru, "lens_converged_layer"), vals(rx, "lens_converged_layer"), "the layers")
        claim("the × model's logit lens reaches the final answer at an earlier layer", *res)
        if x["max_kl_prev"] is None or u["max_kl_prev"] is None:
            claim("the × model's prediction changes more smoothly between layers", "—", UNMEASURABLE)
        else:
            said = f"largest KL between consecutive layers: × {x['max_kl_prev']:.4f}, uniform {u['max_kl_prev']:.4f}"
            res = _shift(said, vals(ru, "max_kl_prev"), vals(rx, "max_kl_prev"), "it")
            claim("the × model's prediction changes more smoothly between layers", *res)
    cols = [
        Col("claim", "claim (Wu et al., Variable-Width Transformers)"),
        Col("measured", "measured here"),
        Col("verdict", "verdict"),
    ]
    t = Table("inside_claims", "The paper's claims about the inside of the models, against this sweep", cols, rows)
    t.notes.append(
        "one sweep, one size, one seed unless stated: a verdict says what these runs show, not whether "
        "the claim holds at the paper's scale"
    )
    return t
