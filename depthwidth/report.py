"""``dw report``: the tables a researcher would build by hand after a sweep and a fit.

``build(...)`` gathers one sweep (``ROOT/NAME``: run summaries, manifest,
status, fit.json) or a ``--runs`` table into a :class:`Data`, then into a
report: a dict ``{"schema", "source", "tables": {key: Table}, "notes",
"figures"}``.  Every table keeps raw values (``rows``, machine formats: json,
csv) and knows how to display itself (rich, markdown).  Renderers live in
``render_*``; figures in ``report_figs.py`` (matplotlib, imported only for
``--plots``).  No torch here.

Conventions: losses are held-out nats per token at each run's final token
budget; ``params`` count embeddings; FLOPs/token are training FLOPs (6N +
attention); mean ± sd over seeds (sample sd, n-1) where a cell has several.
Published numbers (SCIENCE.md) appear in columns labelled *paper*, ours in
columns labelled *measured*.
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from depthwidth.errors import BadInput, bad

SCHEMA = "dw.report/1"
FORMATS = ("rich", "markdown", "csv", "json")
SHAPES = ("uniform", "increasing", "decreasing", "diamond", "x")
DONE = ("done",)
NOT_DONE = ("pending", "running", "failed", "diverged", "preempted", "cancelled", "lost")

# ---- published numbers (SCIENCE.md; used only where a sweep carries no ref of its own) ----
PAPER_DD_LOSS = {  # (depth, width): (loss, params) — "The Depth Delusion", training loss
    (2, 512): (3.945, 58e6), (8, 512): (3.543, 77e6), (16, 512): (3.435, 102.1e6),
    (24, 512): (3.468, 127.3e6), (32, 512): (3.441, 152.4e6), (16, 256): (3.929, None),
    (16, 1536): (3.049, None), (24, 1792): (2.821, None), (80, 1024): (2.978, None),
    (40, 2432): (2.519, None), (72, 1792): (2.681, None), (32, 4096): (2.298, 6.86e9),
    (64, 2816): (2.417, 6.38e9),
}
PAPER_KAPPA = 2.43  # D_crit ≈ kappa·ln W
PAPER_TAU_EXPONENT = 0.44  # tau(W) ∝ W^0.44, R² 0.98
PAPER_TAU_R2 = 0.98
PAPER_FIT = {"r2": 0.922, "rmse": 0.113, "alpha": 0.22}
PAPER_DCRIT = {"GPT-3": 22.9, "PaLM-540B": 23.9, "Llama-3-70B": 21.9}


# =============================================================================
# tables
# =============================================================================


@dataclass
class Col:
    key: str
    label: str
    fmt: str = "{}"  # format for display; None values show as "—"

    def show(self, v) -> str:
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return "—"
        if isinstance(v, bool):
            return "yes" if v else "no"
        try:
            return self.fmt.format(v)
        except (ValueError, TypeError):
            return str(v)


@dataclass
class Table:
    key: str
    title: str
    cols: list[Col]
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pivot: dict | None = None  # {"index", "columns", "cell"(row -> str), "index_label", "column_label"}

    def display(self) -> tuple[list[str], list[list[str]]]:
        """(header labels, rows of strings) as a person reads the table."""
        if self.pivot:
            p = self.pivot
            idx = sorted({r[p["index"]] for r in self.rows})
            cs = sorted({r[p["columns"]] for r in self.rows})
            cell = {(r[p["index"]], r[p["columns"]]): p["cell"](r) for r in self.rows}
            head = [p["index_label"]] + [f"{p['column_label']}{c}" for c in cs]
            return head, [[_int(i)] + [cell.get((i, c), "") for c in cs] for i in idx]
        return [c.label for c in self.cols], [[c.show(r.get(c.key)) for c in self.cols] for r in self.rows]

    def to_json(self) -> dict:
        return {"title": self.title, "columns": {c.key: c.label for c in self.cols}, "rows": self.rows,
                "notes": self.notes}


def _int(x) -> str:
    return str(int(x)) if isinstance(x, (int, float)) and math.isfinite(x) and float(x).is_integer() else str(x)


def _f(x):
    """float or None (NaN and junk -> None)."""
    from depthwidth.fitdata import finite_or_none

    return finite_or_none(x)


def _mean_sd(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return m, sd


def _pm(m, sd, fmt="{:.4f}") -> str:
    if m is None:
        return "—"
    return fmt.format(m) + (f" ± {fmt.format(sd)}" if sd is not None else "")


# =============================================================================
# data
# =============================================================================


@dataclass
class Data:
    source: dict
    runs: list[dict]  # one per run: run, depth, width, shape, seed, state, loss, tokens, params, ...
    points: list[dict]  # every (run, budget) point with a finite loss
    fit: dict | None
    probes: list[dict]
    notes: list[str] = field(default_factory=list)


@contextmanager
def _runs_env(root):
    """store.status() reads $DW_RUNS; point it at --root for the call."""
    old = os.environ.get("DW_RUNS")
    if root is not None:
        os.environ["DW_RUNS"] = str(root)
    try:
        yield
    finally:
        if root is not None:
            if old is None:
                os.environ.pop("DW_RUNS", None)
            else:
                os.environ["DW_RUNS"] = old


def _parse_overrides(ovr) -> dict:
    out = {}
    for o in ovr or []:
        k, _, v = str(o).partition("=")
        k = k.lstrip("+")
        if k in ("model.depth", "model.width", "run.seed"):
            try:
                out[k.split(".")[1]] = int(float(v))
            except ValueError:
                pass
        elif k == "model.shape":
            out["shape"] = v
    return out


def _shape(s):
    return None if s is None or (isinstance(s, float) and math.isnan(s)) else str(s)


def load(name: str | None = None, *, runs=None, columns: str | None = None, root=None, fit_path=None,
         source: str = "store", project: str | None = None, group: str | None = None) -> Data:
    """Everything a report reads, from a sweep directory, a run table or the W&B API (one of them)."""
    import json

    from depthwidth.fitdata import apply_columns, parse_columns, runs_root
    from depthwidth.fitrun import check_source

    check_source(name, runs, source, project)
    if fit_path is not None and not Path(fit_path).is_file():
        raise bad("--fit", str(fit_path), "an existing fit.json written by dw fit")
    fit = None
    if source == "wandb":
        from depthwidth.wandb_source import run_table_from_wandb

        df = apply_columns(run_table_from_wandb(project, group), parse_columns(columns))
        d = _table_data(df, f"wandb:{project}" + (f" group {group}" if group else ""))
    elif runs is not None:
        d = _load_table(runs, columns)
    else:
        sweep_dir = runs_root(root) / name
        if not sweep_dir.is_dir():
            raise bad("sweep", name, f"a sweep directory under {runs_root(root)} (set --root or DW_RUNS)")
        d = _load_sweep(name, sweep_dir, root)
        fp = sweep_dir / "fit.json"
        if fit_path is None and fp.is_file():
            fit_path = fp
    if fit_path is not None:
        try:
            fit = json.loads(Path(fit_path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise bad("--fit", str(fit_path), f"a readable fit.json ({type(e).__name__})") from None
        if not isinstance(fit, dict) or "params" not in fit or "law" not in fit:
            raise bad("--fit", str(fit_path), "a fit.json written by dw fit (keys law, params)")
        d.source["fit"] = str(fit_path)
    d.fit = fit
    return d


def _load_sweep(name: str, sweep_dir: Path, root) -> Data:
    import json

    from depthwidth import store
    from depthwidth.atomic import read_jsonl

    df = store.run_table(sweep_dir)
    summ = {}
    for p in sorted(sweep_dir.glob("*/summary.json")):
        try:
            s = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(s, dict):
            summ[str(s.get("run_id") or p.parent.name)] = s
    manifest = store.manifest_runs(read_jsonl(sweep_dir / store.MANIFEST))
    states = {}
    notes = []
    if manifest:
        with _runs_env(root if root is not None else sweep_dir.parent):
            try:
                st = store.status(name)
                states = {r["run_id"]: r for r in st["runs"]}
            except BadInput:
                pass
    else:
        notes.append("no manifest: run states come from each summary.json alone")
    ids = list(manifest) + [r for r in summ if r not in manifest]
    if not ids:
        raise bad("sweep", name, f"a sweep with a manifest or at least one run summary.json in {sweep_dir}")
    recs = []
    for rid in ids:
        s, m, stt = summ.get(rid, {}), manifest.get(rid, {}), states.get(rid, {})
        ov = _parse_overrides(m.get("overrides"))
        state = stt.get("state") or s.get("status") or "lost"  # no manifest: the summary's word
        recs.append({
            "run": rid, "label": m.get("label"), "ref": m.get("ref"), "state": state,
            "reason": stt.get("reason") or s.get("reason"),
            "depth": s.get("depth", ov.get("depth")), "width": s.get("width", ov.get("width")),
            "shape": s.get("shape", ov.get("shape")), "seed": s.get("seed", ov.get("seed")),
            "params": _f(s.get("params") or m.get("params")), "params_non_embedding": _f(s.get("params_non_embedding")),
            "flops_per_token": _f(s.get("flops_per_token")), "kv_bytes_per_token": _f(s.get("kv_bytes_per_token")),
            "widths": s.get("widths"), "overrides": m.get("overrides"),
        })
    unread = df.attrs.get("unreadable", [])
    if unread:
        notes.append(f"unreadable summary.json: {', '.join(unread)}")
    points = _points(df)
    _attach_final(recs, points)
    from depthwidth.store import probe_profiles

    return Data({"sweep": name, "dir": str(sweep_dir), "runs": None}, recs, points, None,
                probe_profiles(sweep_dir), notes)


def _load_table(path, columns) -> Data:
    from depthwidth.fitdata import apply_columns, parse_columns, read_table

    return _table_data(apply_columns(read_table(path), parse_columns(columns)), str(path))


def _table_data(df, path: str) -> Data:
    """A report's data from a run table (one row per (run, token budget) point)."""
    if "loss" not in df.columns:
        raise BadInput(f"missing column loss in {path} (table has: {', '.join(map(str, df.columns))[:300]}; map with --columns loss=COLUMN)")
    if "run" not in df.columns:
        df = df.assign(run=[f"row{i}" for i in range(len(df))])
    points = _points(df)
    recs = []
    for rid, g in df.groupby("run", sort=False):
        r0 = g.iloc[-1]
        get = lambda k: r0[k] if k in g.columns else None  # noqa: E731
        st = get("status")
        recs.append({
            "run": str(rid), "label": get("label"), "ref": None,
            "state": str(st) if isinstance(st, str) else "done", "reason": get("reason"),
            "depth": _f(get("depth")), "width": _f(get("width")), "shape": _shape(get("shape")),
            "seed": get("seed"), "params": _f(get("params")), "params_non_embedding": None,
            "flops_per_token": _f(get("flops_per_token")), "kv_bytes_per_token": _f(get("kv_bytes_per_token")),
            "widths": None, "overrides": None,
        })
    _attach_final(recs, points)
    return Data({"sweep": None, "dir": None, "runs": str(path)}, recs, points, None, [], [])


def _points(df) -> list[dict]:
    out = []
    for r in df.to_dict("records"):
        loss = _f(r.get("loss"))
        if loss is None:
            continue
        out.append({"run": str(r.get("run")), "loss": loss, "tokens": _f(r.get("tokens")),
                    "flops": _f(r.get("flops")), "params": _f(r.get("params")),
                    "depth": _f(r.get("depth")), "width": _f(r.get("width")),
                    "shape": _shape(r.get("shape")), "status": r.get("status")})
    return out


def _attach_final(recs, points) -> None:
    """Each run's loss at its final (largest) token budget."""
    by = {}
    for p in points:
        if p["run"] not in by or (p["tokens"] or 0) >= (by[p["run"]]["tokens"] or 0):
            by[p["run"]] = p
    for r in recs:
        p = by.get(r["run"])
        r["loss"] = p["loss"] if p else None
        r["tokens"] = p["tokens"] if p else None
        r["flops"] = p["flops"] if p else None
        for k in ("depth", "width"):
            r[k] = _f(r[k]) if r[k] is not None else (p[k] if p else None)
        if r["params"] is None and p:
            r["params"] = p["params"]
        if r["shape"] in (None, "") and p:
            r["shape"] = p["shape"]
        if r["depth"] is not None:
            r["depth"] = int(r["depth"])
        if r["width"] is not None:
            r["width"] = int(r["width"])


def _usable(r) -> bool:
    return r["state"] in DONE and r["loss"] is not None and r["depth"] is not None and r["width"] is not None


def _uniform(r) -> bool:
    return r["shape"] in (None, "uniform")


def _cells(runs, key=lambda r: (r["depth"], r["width"])) -> dict:
    """key -> {loss, sd, seeds, params, ...} over the done runs of each cell."""
    groups: dict = {}
    for r in runs:
        if _usable(r):
            groups.setdefault(key(r), []).append(r)
    out = {}
    for k, rs in groups.items():
        m, sd = _mean_sd([r["loss"] for r in rs])
        toks = sorted({r["tokens"] for r in rs if r["tokens"] is not None})
        out[k] = {"loss": m, "sd": sd, "seeds": len(rs), "runs": [r["run"] for r in rs],
                  "params": _mean_sd([r["params"] for r in rs])[0],
                  "flops_per_token": _mean_sd([r["flops_per_token"] for r in rs])[0],
                  "kv_bytes_per_token": _mean_sd([r["kv_bytes_per_token"] for r in rs])[0],
                  "flops": _mean_sd([r["flops"] for r in rs])[0],
                  "tokens": toks[-1] if toks else None, "widths": rs[0].get("widths"),
                  "depth": rs[0]["depth"], "width": rs[0]["width"], "shape": rs[0]["shape"] or "uniform"}
    return out


def _paper_loss(r) -> tuple:
    """(published loss, published params, where from) for a run, or (None, None, None)."""
    ref = r.get("ref") or {}
    if ref.get("source") == "published" and ref.get("loss") is not None:
        return _f(ref.get("loss")), _f(ref.get("params")), "sweep ref"
    if r.get("ref") is None and _uniform(r) and (r["depth"], r["width"]) in PAPER_DD_LOSS:
        loss, params = PAPER_DD_LOSS[(r["depth"], r["width"])]
        return loss, params, "SCIENCE.md"
    return None, None, None


def build(data: Data, at_width: int | None = None, at_depth: int | None = None) -> dict:
    """The report: {schema, source, runs, states, at_width, at_depth, tables{key: Table}, notes, figures}."""
    from depthwidth.report_tables import build as _build

    return _build(data, at_width=at_width, at_depth=at_depth)


# =============================================================================
# rendering
# =============================================================================

ORDER = ("loss_grid", "u_shape", "width_sweep", "pairs", "shapes", "fit", "fit_compare", "dcrit_widths",
         "dcrit_models", "paper", "missing")


def _tables(rep):
    return [rep["tables"][k] for k in ORDER if k in rep["tables"]]


def _title(rep) -> str:
    s = rep["source"]
    what = f"sweep {s['sweep']}" if s.get("sweep") else f"run table {s.get('runs')}"
    st = ", ".join(f"{n} {k}" for k, n in sorted(rep["states"].items()))
    return f"dw report — {what}: {rep['runs']} runs ({st or 'none'})"


def render_rich(rep, console) -> None:
    from rich.markup import escape
    from rich.table import Table as RT

    console.print(f"[bold]{escape(_title(rep))}[/bold]")
    for t in _tables(rep):
        head, rows = t.display()
        rt = RT(title=escape(t.title), title_justify="left")
        for i, h in enumerate(head):
            rt.add_column(escape(h), justify="left" if i == 0 and not t.pivot else "right")
        for r in rows:
            rt.add_row(*(escape(x) for x in r))
        if rows:
            console.print(rt)
        else:
            console.print(f"[bold]{escape(t.title)}[/bold]: —")
        for n in t.notes:
            console.print(f"  [dim]{escape(n)}[/dim]")
    for n in rep["notes"]:
        console.print(f"[yellow]note:[/yellow] {escape(n)}")
    for f in rep["figures"]:
        console.print(escape(f"figure: {f['path']} ({f['width_px']}×{f['height_px']} px) — {f['title']}"))


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _md_note(n: str) -> str:
    return n.replace("*", "\\*")


def md_table(t: Table) -> str:
    head, rows = t.display()
    out = ["| " + " | ".join(_md_cell(h) for h in head) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"]
    out += ["| " + " | ".join(_md_cell(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


def render_markdown(rep, fig_base: str | None = None) -> str:
    """Markdown a person can paste into a draft; figures linked relative to ``fig_base``."""
    out = [f"# {_title(rep)}", ""]
    for t in _tables(rep):
        out += [f"## {t.title}", ""]
        out += [md_table(t), ""] if t.rows else ["—", ""]
        out += [f"- {_md_note(n)}" for n in t.notes] + ([""] if t.notes else [])
    if rep["notes"]:
        out += ["## Notes", ""] + [f"- {n}" for n in rep["notes"]] + [""]
    if rep["figures"]:
        out += ["## Figures", ""]
        for f in rep["figures"]:
            link = f["file"] if fig_base is None else f"{fig_base.rstrip('/')}/{f['file']}"
            out += [f"![{f['title']}]({link})", "", f"*{f['title']}* — {f['caption']}", ""]
    return "\n".join(out).rstrip() + "\n"


def csv_frame(rep):
    """All tables in one rectangular frame: column ``table`` names the table, other columns are its keys."""
    import pandas as pd

    frames = []
    for t in _tables(rep):
        if t.rows:
            frames.append(pd.DataFrame(t.rows).assign(table=t.key))
    if not frames:
        return pd.DataFrame(columns=["table"])
    df = pd.concat(frames, ignore_index=True, sort=False)
    return df[["table"] + [c for c in df.columns if c != "table"]]


def render_csv(rep) -> str:
    return csv_frame(rep).to_csv(index=False)


def to_json(rep) -> dict:
    from depthwidth.fitrun import jsonable

    out = {k: v for k, v in rep.items() if k != "tables"}
    out["tables"] = {t.key: t.to_json() for t in _tables(rep)}
    return jsonable(out)


def write_outputs(rep, out_dir: Path) -> list[str]:
    """report.md (figures linked), report.json and tables/NAME.csv in ``out_dir``."""
    import json

    from depthwidth.atomic import write_text

    written = []
    write_text(out_dir / "report.md", render_markdown(rep))
    write_text(out_dir / "report.json", json.dumps(to_json(rep), indent=2) + "\n")
    written += [str(out_dir / "report.md"), str(out_dir / "report.json")]
    for t in _tables(rep):
        if t.rows:
            import pandas as pd

            p = out_dir / "tables" / f"{t.key}.csv"
            write_text(p, pd.DataFrame(t.rows).to_csv(index=False))
            written.append(str(p))
    return written
