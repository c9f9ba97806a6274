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
                   supported / not measurable on this sweep.

"Middle layers" are layers 2..L−1 (none when L < 3).  No torch here.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.measure import doc as adoc
from depthwidth.report.document import SHAPES, Col, Table

CONVERGED_NATS = 0.1  # lens CE within this of the final layer's: "the answer is there"
DEAD_GAP = 0.01  # "more dead units" needs at least 1% of the units more: one seed's few units are not a finding
VALLEY_NEAR_ZERO = 0.2  # a middle-layer entropy at or below this is a compression valley
SUPPORTED, REFUTED, UNMEASURABLE = "supported", "not supported", "not measurable on this sweep"


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


def by_shape(analyses: list[dict]) -> tuple[tuple | None, dict]:
    """((h, L), {shape: {"runs", "widths", "eval_loss", KEY: per-layer mean}}) of the best-covered group."""
    done = [a for a in analyses if a["state"] == "done"]
    groups: dict = {}
    for a in done:
        groups.setdefault((a["width"], a["depth"]), {}).setdefault(a["shape"], []).append(a["doc"])
    if not groups:
        return None, {}
    key = max(groups, key=lambda k: (len(groups[k]), k[1] or 0, k[0] or 0))
    out = {}
    for shape in sorted(groups[key], key=lambda s: SHAPES.index(s) if s in SHAPES else 99):
        docs = groups[key][shape]
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
        out[shape] = prof
    return key, out


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
    key, profs = by_shape(analyses)
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
    return {"inside": t, "inside_claims": _claims({r["shape"]: r for r in rows})}


def _claims(s: dict) -> Table:
    u, x = s.get("uniform"), s.get("x")
    rows = []

    def claim(text, measured, verdict):
        rows.append({"claim": text, "measured": measured, "verdict": verdict})

    # 1. a compression valley in the uniform model
    if u is None or u["min_entropy_middle"] is None:
        claim("a uniform model's middle layers collapse to low entropy (compression valley)", "—", UNMEASURABLE)
    else:
        v = u["min_entropy_middle"]
        claim(
            "a uniform model's middle layers collapse to low entropy (compression valley)",
            f"uniform: lowest middle-layer H {v:.3f} (valley: ≤ {VALLEY_NEAR_ZERO})",
            SUPPORTED if v <= VALLEY_NEAR_ZERO else REFUTED,
        )
    both = u is not None and x is not None
    # 2. x keeps entropy up at its bottleneck
    if not both or u["min_entropy_middle"] is None:
        claim("the × model keeps entropy up where the uniform one collapses", "—", UNMEASURABLE)
    else:  # without a valley in the uniform model there is nothing for × to avoid
        valley = u["min_entropy_middle"] <= VALLEY_NEAR_ZERO
        claim(
            "the × model keeps entropy up where the uniform one collapses",
            f"lowest middle-layer H: × {x['min_entropy_middle']:.3f} vs uniform {u['min_entropy_middle']:.3f}; "
            f"× at its bottleneck (layer {x['narrowest_layer']}): {x['entropy_narrowest']:.3f}"
            + ("" if valley else " (the uniform model has no valley here)"),
            UNMEASURABLE if not valley else SUPPORTED if x["min_entropy_middle"] > u["min_entropy_middle"] else REFUTED,
        )
    # 3. dead MLP units in the uniform middle layers, fewer in x
    if not both or u["dead_middle"] is None:
        claim("uniform middle layers have more dead MLP units than the × model's", "—", UNMEASURABLE)
    else:
        gap = u["dead_middle"] - x["dead_middle"]
        claim(
            "uniform middle layers have more dead MLP units than the × model's",
            f"dead fraction, middle layers: uniform {u['dead_middle']:.3f}, × {x['dead_middle']:.3f}"
            + (f" (a gap under {DEAD_GAP:.0%} of the units)" if 0 < gap < DEAD_GAP else ""),
            SUPPORTED if gap >= DEAD_GAP else REFUTED if gap <= 0 else UNMEASURABLE,
        )
    # 4./5. logit lens: x converges earlier and more smoothly
    if not both:
        claim("the × model's logit lens reaches the final answer at an earlier layer", "—", UNMEASURABLE)
        claim("the × model's prediction changes more smoothly between layers", "—", UNMEASURABLE)
    else:
        claim(
            "the × model's logit lens reaches the final answer at an earlier layer",
            f"first layer within {CONVERGED_NATS} nats of the final CE: × {x['lens_converged_layer']}, "
            f"uniform {u['lens_converged_layer']} (of {u['depth']})",
            SUPPORTED if x["lens_converged_layer"] < u["lens_converged_layer"] else REFUTED,
        )
        if x["max_kl_prev"] is None or u["max_kl_prev"] is None:
            claim("the × model's prediction changes more smoothly between layers", "—", UNMEASURABLE)
        else:
            claim(
                "the × model's prediction changes more smoothly between layers",
                f"largest KL between consecutive layers: × {x['max_kl_prev']:.4f}, uniform {u['max_kl_prev']:.4f}",
                SUPPORTED if x["max_kl_prev"] < u["max_kl_prev"] else REFUTED,
            )
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
