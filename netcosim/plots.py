"""Plots of a sweep or fault-study directory, written as PNG and SVG beside its table.

``plot_dir(DIR)`` reads DIR/sweep_meta.json to know what DIR holds:
- a sweep: each metric against the swept parameter with the most values, one line per
  topology (or per the sweep's categorical parameter), a panel per value of one further small
  parameter, the median over any others; and heat maps over the two numeric parameters with
  the most values;
- a fault study: slowdown against failure fraction (median, p10-p90 band, p99, worst), the CDF
  of slowdown per fraction, and the costliest single links.
Axis labels carry units; log axes where values span decades.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from netcosim.sweep import table

METRICS = ("busbw_GBps", "algbw_GBps", "step_time_s", "mfu",
           # serving (inference workloads, docs/inference.md)
           "output_tokens_per_s_per_gpu", "ttft_p99_s", "itl_p50_s", "goodput_rps",
           "makespan_us")
_LABELS = {
    "busbw_GBps": "bus bandwidth (GB/s)", "algbw_GBps": "algorithm bandwidth (GB/s)",
    "makespan_us": "completion time (µs)", "step_time_s": "training step time (s)",
    "mfu": "model FLOPs utilisation (fraction)", "hosts": "GPUs / hosts",
    "workload.bytes": "message size (bytes)", "slowdown": "slowdown (× fault-free time)",
    "fraction": "fraction of links failed", "gpus": "GPUs",
    "scaleup_gbps": "scale-up bandwidth per GPU (Gb/s)",
    "scaleout_gbps": "scale-out bandwidth per GPU (Gb/s)",
    "bandwidth_gbps": "link bandwidth (Gb/s)",
    "output_tokens_per_s_per_gpu": "output tokens/s per GPU",
    "ttft_p99_s": "time to first token, p99 (s)", "itl_p50_s": "inter-token latency, p50 (s)",
    "goodput_rps": "goodput (requests/s within SLO)",
}


def label(col: str) -> str:
    """An axis label with its unit, from a column name."""
    if col in _LABELS:
        return _LABELS[col]
    name = col.split(".")[-1]
    if name.lower() == "gbps":
        return "link bandwidth (Gb/s)"
    if name.endswith("_per_gpu") and len(name) > 8:  # compute_s_per_gpu: "compute per GPU (s)"
        inner = label(name[:-8])
        head, paren, unit = inner.partition(" (")
        return f"{head} per GPU" + (f" ({unit}" if paren else "")
    if name.endswith("_per_s") and len(name) > 6:  # a rate: tokens_per_s is tokens/s, not s
        return f"{name[:-6].replace('_', ' ')}/s"
    for suffix, unit in (("_gbps", "Gb/s"), ("_GBps", "GB/s"), ("_us", "µs"), ("_s", "s"),
                         ("_rps", "requests/s"), ("_GB", "GB"), ("bytes", "bytes")):
        if name.endswith(suffix):
            head = name[: -len(suffix)].rstrip('_').replace('_', ' ')
            return f"{head} ({unit})" if head else name
    return name.replace("_", " ")


def _is_gpu_kind(kind) -> bool:
    """A fault study of slowed GPUs (gpu_slow, hbm_degrade), whose fraction is of GPUs."""
    return str(kind or "").partition(":")[0] in ("gpu_slow", "hbm_degrade")


def _fraction_label(kind) -> str:
    return "fraction of GPUs slowed" if _is_gpu_kind(kind) else label("fraction")


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3,
                         "font.size": 10, "axes.titlesize": 10, "legend.fontsize": 9,
                         # SVG element ids hashed from the content with a fixed salt, not a
                         # random one: the same table gives the same file (with _save's date)
                         "svg.hashsalt": "netcosim"})
    return plt


def _save(fig, path_stem: Path, tight: bool = True) -> list[Path]:
    if tight:
        fig.tight_layout()
    out = []
    for ext in ("png", "svg"):
        p = path_stem.with_suffix(f".{ext}")
        # no date in the SVG's metadata: a figure redrawn from the same table is the same
        # file, so committed figures (docs/studies/) change only when their numbers do
        fig.savefig(p, dpi=150 if ext == "png" else None,
                    metadata={"Date": None} if ext == "svg" else None)
        out.append(p)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return out


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _bytes_ticks(ax, axis="x") -> None:
    from matplotlib.ticker import FuncFormatter

    from netcosim.units import format_bytes

    def fmt(v, _):
        if v <= 0:
            return ""
        n = int(round(v))
        return format_bytes(n) if abs(n - v) < 1e-6 * v else f"{v:.3g}"

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_formatter(FuncFormatter(fmt))


def _log_if_wide(ax, values, axis="x", col="") -> None:
    v = np.array([x for x in values if _num(x) and x > 0], dtype=float)
    if v.size and v.max() / v.min() >= 16:
        if axis == "x":
            ax.set_xscale("log", base=2 if "bytes" in col else 10)
        else:
            ax.set_yscale("log")
    if "bytes" in col:
        _bytes_ticks(ax, axis)


# =========================================================================== entry point
def plot_dir(out_dir) -> list[Path]:
    """The plots of DIR. A sweep_meta.json or sweep.csv that netcosim did not write (corrupt
    JSON, wrong types, an empty table, missing columns) is an InputError naming the file."""
    from topo.errors import InputError

    out = Path(out_dir)
    meta = read_meta(out)
    csv_path = out / table.CSV_NAME
    if not csv_path.exists() and meta.get("kind") != "fault_cases":
        raise InputError(f"plot {str(out)!r}: no {table.CSV_NAME} here (run netcosim sweep or "
                         f"netcosim faults with --out {out} first)")
    if meta.get("kind") == "fault_cases":
        return _drawing(out, "study_summary.csv", fault_case_plots, out, meta)
    cols, rows = read_csv(csv_path, f"plot {str(out)!r}")
    if meta.get("kind") == "faults":
        return _drawing(out, table.CSV_NAME, fault_plots, out, rows, meta)
    params = meta.get("params") or [c for c in cols if c not in table.LEAD]
    if meta.get("plots"):
        check_plot_columns(meta["plots"], cols, f"plot {str(out)!r}: sweep_meta.json")
        return _drawing(out, table.CSV_NAME, spec_plots, out, rows, params, meta["plots"],
                        meta.get("name") or "")
    return _drawing(out, table.CSV_NAME, sweep_plots, out, rows, params, meta.get("name") or "")


# sweep_meta.json keys the plots read, and the types netcosim writes
_META_TYPES = {"kind": str, "name": str, "scenario": str, "layer": str, "fault_kind": str,
               "factor": (int, float), "params": list, "plots": list, "dirs": list}


def read_meta(out: Path) -> dict:
    """DIR/sweep_meta.json ({} when absent), checked: an object with the types netcosim
    writes, [[plot]] specs as the sweep loader accepts them, case directories as plain names."""
    from topo.errors import InputError

    path = out / "sweep_meta.json"
    if not path.exists():
        return {}
    at = f"plot {str(out)!r}: sweep_meta.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{at}: cannot be read ({e})") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{at}: not valid JSON ({e.msg} at line {e.lineno} column "
                         f"{e.colno})") from None
    except RecursionError:
        raise InputError(f"{at}: nested too deeply") from None
    if not isinstance(meta, dict):
        raise InputError(f"{at}: expected a JSON object, got {type(meta).__name__}")
    for key, typ in _META_TYPES.items():
        v = meta.get(key)
        if v is not None and (not isinstance(v, typ) or isinstance(v, bool)):
            raise InputError(f"{at}: {key} = {json.dumps(v)[:60]}: expected "
                             f"{'a number' if key == 'factor' else 'a ' + getattr(typ, '__name__', 'value')}")
    if not all(isinstance(p, str) for p in meta.get("params") or []):
        raise InputError(f"{at}: params: expected a list of column names")
    for d in meta.get("dirs") or []:
        if not isinstance(d, str) or not d or d in (".", "..") or "/" in d or "\\" in d:
            raise InputError(f"{at}: dirs: {d!r} is not a directory name in {str(out)!r}")
    if meta.get("plots"):
        from netcosim.sweep.spec import parse_plots

        try:
            meta["plots"] = parse_plots(meta["plots"])
        except InputError as e:
            raise InputError(f"{at}: {e}") from None
    return meta


def read_csv(path: Path, at: str):
    """(columns, rows) of a table netcosim wrote; an empty or unreadable one is an
    InputError naming it."""
    import csv

    from topo.errors import InputError

    try:
        cols, rows = table.read_table(path)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{at}: {path.name} cannot be read ({e})") from None
    if not cols:
        raise InputError(f"{at}: {path.name} is empty (no header, no rows); run the sweep "
                         f"again")
    if len(set(cols)) != len(cols):
        raise InputError(f"{at}: {path.name} has a column twice")
    return cols, rows


def check_plot_columns(specs, cols, at: str) -> None:
    """Every column a [[plot]] names is in the table."""
    from topo.errors import InputError

    have = set(cols)
    for i, sp in enumerate(specs):
        named = [("x", sp.get("x")), ("hue", sp.get("hue")), ("facet", sp.get("facet"))]
        if sp.get("kind") == "heatmap":
            named += [("y", sp.get("y")), ("metric", sp.get("metric"))]
        else:
            named += [("y", y) for y in sp.get("y") or []]
        named += [("where", c) for c in (sp.get("where") or {})]
        for key, c in named:
            if c is not None and c not in have:
                shown = ", ".join(c for c in cols if c not in ("scenario", "error"))
                raise InputError(f"{at}: plot[{i}].{key} = {c!r}: {table.CSV_NAME} has no such "
                                 f"column (columns: {shown})")


def _drawing(out: Path, name: str, fn, *args) -> list[Path]:
    """Draw; a table whose rows do not have the shape netcosim writes is an InputError."""
    from topo.errors import InputError

    try:
        return fn(*args)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise InputError(f"plot {str(out)!r}: {name} does not hold what netcosim writes "
                         f"({type(e).__name__}: {e})") from None


def spec_plots(out: Path, rows, params, specs, title: str = "") -> list[Path]:
    """The figures a sweep file asks for with [[plot]] (see netcosim.sweep.spec.parse_plots)."""
    written = []
    for i, sp in enumerate(specs):
        sel = [r for r in rows if r.get("status") == "ok" and _matches(r, sp.get("where", {}))]
        if not sel:
            continue
        roles = [sp.get(k) for k in ("x", "hue", "facet")]
        if sp["kind"] == "heatmap":
            roles.append(sp["y"])
        vals = {c: sorted({r.get(c) for r in sel if r.get(c) is not None}, key=_order)
                for c in set(params) | {c for c in roles if c}}
        others = [p for p in params if p not in roles and len(vals.get(p, ())) > 1]
        t = sp.get("title") or title
        if sp["kind"] == "line":
            for m in sp["y"]:
                if any(_num(r.get(m)) for r in sel):
                    written += _line_plot(out, sel, m, sp["x"], sp.get("hue"), sp.get("facet"),
                                          others, vals, t, sp.get("name"))
        else:
            written += _heat_map(out, sel, sp["metric"], sp["x"], sp["y"], sp.get("facet"),
                                 vals, t, sp.get("name"))
    return written


def _order(v):
    return (0, v, "") if _num(v) else (1, 0, str(v))


def _matches(row, where: dict) -> bool:
    for col, want in where.items():
        v = row.get(col)
        if v is None:  # rows without the column (another block's) are kept
            continue
        wants = want if isinstance(want, list) else [want]
        # or as the table writes them: a label given as text that reads as a number ("16")
        # comes back from sweep.csv as one (16), and the figure was silently not drawn
        if v not in wants and table._cell(v) not in {table._cell(w) for w in wants}:
            return False
    return True


# =========================================================================== sweeps
def _roles(rows, params):
    """(x, hue, facet, others): x the numeric parameter with most values, hue the topology
    kind or another categorical parameter, facet one more parameter of at most 4 values."""
    vals = {p: list(dict.fromkeys(r.get(p) for r in rows if r.get(p) is not None))
            for p in params}
    numeric = [p for p in params if vals[p] and all(_num(v) for v in vals[p]) and len(vals[p]) > 1]
    categorical = [p for p in params if p not in numeric and len(vals[p]) > 1]
    hue = next((p for p in categorical if p.endswith("topology.kind") or p in ("fabric", "topology")),
               categorical[0] if categorical else None)
    cands = sorted(numeric, key=lambda p: -len(vals[p]))
    x = cands[0] if cands else None
    rest = [p for p in params if p not in (x, hue) and len(vals[p]) > 1]
    if hue is None and rest:
        hue = min(rest, key=lambda p: len(vals[p]))
        rest.remove(hue)
    facet = next((p for p in sorted(rest, key=lambda p: len(vals[p])) if len(vals[p]) <= 4), None)
    others = [p for p in rest if p != facet]
    return x, hue, facet, others, vals


def sweep_plots(out: Path, rows, params, title: str = "") -> list[Path]:
    ok = [r for r in rows if r.get("status") == "ok"]
    metrics = [m for m in METRICS if any(_num(r.get(m)) for r in ok)]
    if not ok or not metrics:
        return []
    x, hue, facet, others, vals = _roles(ok, params)
    if x is None:  # nothing numeric swept: plot against the GPU count if it varies
        if len({r.get("hosts") for r in ok}) > 1:
            x = "hosts"
            vals["hosts"] = sorted({r["hosts"] for r in ok})
        else:
            return []
    written = []
    # the first four present: a collective's two bandwidths and time, a step's time, MFU and
    # makespan, a serving run's throughput, p99 TTFT, p50 ITL and goodput (docs/inference.md)
    for m in metrics[:4]:
        written += _line_plot(out, ok, m, x, hue, facet, others, vals, title)
    numeric = [p for p in params if p != x and vals.get(p) and len(vals[p]) > 1
               and all(_num(v) for v in vals[p])]
    if numeric:  # over the two numeric columns with the most values (docs/sweeps.md)
        y = max(numeric, key=lambda p: len(vals[p]))  # the first of a tie
        written += _heat_map(out, ok, metrics[0], x, y, hue, vals, title, max_panels=4)
    return written


def _median_by(rows, keys, metric):
    groups = defaultdict(list)
    for r in rows:
        if _num(r.get(metric)):
            groups[tuple(r.get(k) for k in keys)].append(float(r[metric]))
    return {k: float(np.median(v)) for k, v in groups.items()}


def _line_plot(out, rows, metric, x, hue, facet, others, vals, title, name=None):
    # a row without the x column (another block's fabric lacks that knob) has no place on the
    # axis: it is left out, as its own block's figures show it (a None x among numbers
    # stopped `netcosim plot` with "sweep.csv does not hold what netcosim writes")
    rows = [r for r in rows if r.get(x) is not None]
    if not rows:
        return []
    stem = name or f"line_{_safe(metric)}_vs_{_safe(x)}"
    if name and metric != "":
        stem = f"{name}_{_safe(metric)}"
    if hue:  # a row without the hue column has no line: it is left out, and said so (it
        # was dropped without a word)
        rows = _drop_missing(rows, hue, metric, stem, "hue")
        if not rows:
            return []
    plt = _plt()
    panels = vals[facet] if facet else [None]
    if facet:  # a row without the facet column (e.g. a fabric without that knob) is in every panel
        rows = [dict(r, **{facet: p}) if r.get(facet) is None else r
                for r in rows for p in (panels if r.get(facet) is None else [None])]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 0.6, 3.8),
                             squeeze=False, sharey=True)
    hues = vals[hue] if hue else [None]
    keys = [k for k in (facet, hue, x) if k]
    med = _median_by(rows, keys, metric)
    for ax, pv in zip(axes[0], panels):
        for hv in hues:
            pts = sorted(((k[-1], v) for k, v in med.items()
                          if (facet is None or k[0] == pv) and (hue is None or k[-2] == hv)),
                         key=lambda p: _order(p[0]))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3.5,
                        label=str(hv) if hue else None)
        _log_if_wide(ax, vals[x], "x", x)
        _log_if_wide(ax, [r.get(metric) for r in rows], "y", metric)
        ax.set_xlabel(label(x))
        if facet:
            ax.set_title(f"{label(facet)} = {_short(pv)}")
    axes[0][0].set_ylabel(label(metric))
    if hue:
        axes[0][-1].legend(title=label(hue), loc="best")
    note = f" (median over {', '.join(others)})" if others else ""
    fig.suptitle(f"{title}: {label(metric)} vs {label(x)}{note}".strip(": "), fontsize=10)
    return _save(fig, out / stem)


def _drop_missing(rows, col, metric, stem, role):
    """The rows that have a value in ``col``; when some with a value of ``metric`` have none,
    one warning line on stderr says how many and which column."""
    import sys

    kept = [r for r in rows if r.get(col) is not None]
    lost = sum(1 for r in rows if r.get(col) is None and _num(r.get(metric)))
    if lost:
        drawn = sum(1 for r in kept if _num(r.get(metric)))
        print(f"warning: plot {stem}: {lost} of {lost + drawn} rows have no {col!r} (the "
              f"{role} column) and are left out", file=sys.stderr)
    return kept


def _heat_map(out, rows, metric, x, y, hue, vals, title, name=None, max_panels=None):
    # only rows with both columns have a cell (a block whose fabric lacks one of them has
    # none: its None stopped `netcosim plot` with "sweep.csv does not hold what netcosim
    # writes"), and only panels with cells are drawn
    rows = [r for r in rows if r.get(x) is not None and r.get(y) is not None]
    if hue and rows:  # a row without the panel column has no panel: left out, and said so
        rows = _drop_missing(rows, hue, metric,
                             name or f"heatmap_{_safe(metric)}_{_safe(x)}_{_safe(y)}",
                             "facet" if max_panels is None else "panel")
    hues = [h for h in vals[hue] if any(r.get(hue) == h for r in rows)] if hue else [None]
    if not rows or not hues:
        return []
    # a [[plot]]'s facet is drawn whole (its panels were cut to 4 without a word); the
    # default figures keep to max_panels and say which they show
    shown = hues[:max_panels] if max_panels else hues
    note = (f" ({label(hue)}: the first {len(shown)} of {len(hues)})"
            if len(shown) < len(hues) else "")
    hues = shown
    plt = _plt()
    # constrained layout leaves room for a colorbar shared by several panels
    fig, axes = plt.subplots(1, len(hues), figsize=(4.4 * len(hues) + 1.4, 3.9), squeeze=False,
                             layout="constrained")
    xs = sorted({r[x] for r in rows}, key=_order)
    ys = sorted({r[y] for r in rows}, key=_order)
    keys = [k for k in (hue, x, y) if k]
    med = _median_by(rows, keys, metric)
    grids = []
    for hv in hues:
        g = np.full((len(ys), len(xs)), np.nan)
        for k, v in med.items():
            if hue is None or k[0] == hv:
                g[ys.index(k[-1]), xs.index(k[-2])] = v
        grids.append(g)
    finite = np.concatenate([g[np.isfinite(g)] for g in grids]) if grids else np.array([])
    vmin, vmax = (finite.min(), finite.max()) if finite.size else (0, 1)
    im = None
    for ax, hv, g in zip(axes[0], hues, grids):
        im = ax.imshow(g, origin="lower", aspect="auto", cmap="viridis", vmin=vmin, vmax=vmax)
        ax.set_xticks(range(len(xs)), [_tick(v, x) for v in xs], rotation=45, ha="right")
        ax.set_yticks(range(len(ys)), [_tick(v, y) for v in ys])
        ax.set_xlabel(label(x))
        ax.set_ylabel(label(y))
        ax.grid(False)
        if hue:
            ax.set_title(f"{label(hue)} = {_short(hv)}")
        if g.size <= 64:
            for (i, j), v in np.ndenumerate(g):
                if math.isfinite(v):
                    ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7,
                            color="white" if v < (vmin + vmax) / 2 else "black")
    fig.colorbar(im, ax=axes[0].tolist(), label=label(metric))
    fig.suptitle(f"{title}: {label(metric)}{note}".strip(": "), fontsize=10)
    return _save(fig, out / (name or f"heatmap_{_safe(metric)}_{_safe(x)}_{_safe(y)}"),
                 tight=False)


def _tick(v, col) -> str:
    if "bytes" in col and _num(v):
        from netcosim.units import format_bytes

        return format_bytes(int(v))
    return f"{v:g}" if _num(v) else str(v)


def _short(v) -> str:
    s = str(v)
    return s if len(s) <= 24 else s[:21] + "..."


def _safe(c: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in c).strip("_")


# =========================================================================== fault studies
def fault_plots(out: Path, rows, meta: dict) -> list[Path]:
    written = []
    rand = [r for r in rows if r.get("study") == "random"]
    what = (f"{meta.get('fault_kind', 'down')}"
            + (f" to {meta.get('factor'):g} of bandwidth" if meta.get("fault_kind") == "degrade"
               else "") + f", {meta.get('layer', 'any')} links")
    if meta.get("fault_kind") in ("gpu_slow", "hbm_degrade"):  # GPU fault studies
        what = (f"GPUs at {meta.get('factor'):g} of their "
                + ("FLOP/s" if meta["fault_kind"] == "gpu_slow" else "HBM bandwidth"))
    title = f"{meta.get('scenario', '')}: {what}"
    if rand:
        written += _slowdown_vs_fraction(out, rand, title, meta.get("fault_kind"))
        written += _slowdown_cdf(out, rand, title, meta.get("fault_kind"))
    cpath = out / "costliest_links.csv"
    if cpath.exists():
        _, costly = read_csv(cpath, f"plot {str(out)!r}")
        if costly:
            written += _costliest_bars(out, costly, title)
    return written


def _by_fraction(rows):
    g = defaultdict(list)
    n = defaultdict(int)
    strand = defaultdict(int)
    for r in rows:
        f = r.get("fraction")
        n[f] += 1
        if r.get("stranded_run"):
            strand[f] += 1
        if _num(r.get("slowdown")):
            g[f].append(float(r["slowdown"]))
    return g, n, strand


def _slowdown_vs_fraction(out, rows, title, kind=None):
    plt = _plt()
    g, n, strand = _by_fraction(rows)
    fr = sorted(f for f in n if _num(f))
    have = [f for f in fr if g[f]]
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    if have:
        q = {p: [np.percentile(g[f], p) for f in have] for p in (10, 50, 90, 99)}
        ax.fill_between(have, q[10], q[90], alpha=0.25, label="p10–p90")
        ax.plot(have, q[50], marker="o", label="median")
        ax.plot(have, q[99], ls="--", label="p99")
        ax.plot(have, [max(g[f]) for f in have], ls="none", marker="v", ms=5, label="worst")
    ax.axhline(1.0, color="grey", lw=0.8)
    if fr and max(fr) / min(fr) >= 8:
        ax.set_xscale("log")
    for f in fr:
        if strand[f]:
            y = max(g[f]) if g[f] else 1.0
            ax.annotate(f"{strand[f]}/{n[f]} stranded", (f, y), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=7, color="firebrick")
    ax.set_xlabel(_fraction_label(kind))
    ax.set_ylabel(label("slowdown"))
    ax.legend(loc="upper left")
    ax.set_title(title)
    return _save(fig, out / "slowdown_vs_fraction")


def _slowdown_cdf(out, rows, title, kind=None):
    plt = _plt()
    g, n, strand = _by_fraction(rows)
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    cmap = plt.get_cmap("viridis")
    fr = sorted(f for f in g if g[f])
    for i, f in enumerate(fr):
        s = np.sort(g[f])
        # over all trials, so stranded runs show as the CDF stopping short of 1
        y = np.arange(1, s.size + 1) / n[f]
        ax.step(s, y, where="post", color=cmap(i / max(1, len(fr) - 1)),
                label=f"{f:.3g}" + (f" ({strand[f]} stranded)" if strand[f] else ""))
    ax.set_xlabel(label("slowdown"))
    ax.set_ylabel("fraction of trials")
    ax.set_ylim(0, 1.02)
    ax.legend(title="GPUs slowed" if _is_gpu_kind(kind) else "links failed", loc="lower right")
    ax.set_title(title)
    return _save(fig, out / "slowdown_cdf")


def _costliest_bars(out, costly, title, top: int = 20):
    plt = _plt()
    rows = costly[:top]
    fig, ax = plt.subplots(figsize=(6.2, 0.28 * len(rows) + 1.4))
    names = [f"{r['u']}–{r['v']} ({r['layer']})" for r in rows]
    finite = [float(r["slowdown"]) for r in rows if _num(r.get("slowdown"))]
    cap = max(finite) if finite else 1.0
    vals = [float(r["slowdown"]) if _num(r.get("slowdown")) else cap for r in rows]
    colors = ["firebrick" if (r.get("stranded") or 0) > 0 else "tab:blue" for r in rows]
    ypos = np.arange(len(rows))[::-1]
    ax.barh(ypos, [v - 1.0 for v in vals], left=1.0, color=colors)
    ax.set_yticks(ypos, names, fontsize=8)
    ax.set_xlabel(label("slowdown") + "; red = strands transfers")
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_title(f"costliest single-link failures\n{title}")
    lo = min(vals) if vals else 1.0
    ax.set_xlim(min(1.0, lo) - 0.002, max(vals) * 1.02 if vals else 1.1)
    return _save(fig, out / "costliest_links")


def fault_case_plots(out: Path, meta: dict) -> list[Path]:
    """A study file with several cases and kinds: each sub-study's own plots, plus median
    slowdown against fraction with one line (and p10-p90 band) per case, a panel per kind."""
    written = []
    for d in meta.get("dirs") or []:
        if (out / d / table.CSV_NAME).exists():
            written += plot_dir(out / d)
    _, rows = read_csv(out / "study_summary.csv", f"plot {str(out)!r}")
    rows = [r for r in rows if _num(r.get("median"))]
    if not rows:
        return written
    plt = _plt()
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    cases = list(dict.fromkeys(r["case"] for r in rows))
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds) + 0.6, 4.0),
                             squeeze=False, sharey=True)
    for ax, k in zip(axes[0], kinds):
        for c in cases:
            rs = sorted((r for r in rows if r["kind"] == k and r["case"] == c),
                        key=lambda r: r["fraction"])
            if not rs:
                continue
            f = [r["fraction"] for r in rs]
            line, = ax.plot(f, [r["median"] for r in rs], marker="o", ms=3.5, label=str(c))
            ax.fill_between(f, [r["median"] for r in rs], [r["p90"] for r in rs],
                            color=line.get_color(), alpha=0.15)
            ax.plot(f, [r["p99"] for r in rs], ls=":", color=line.get_color())
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xscale("log")
        kk, _, f = str(k).partition(":")
        if _is_gpu_kind(k):  # GPUs slowed: no link layer, the factor of FLOP/s or HBM
            ax.set_xlabel(_fraction_label(k))
            ax.set_title(f"GPUs at {f or '0.5'} of their "
                         + ("FLOP/s" if kk == "gpu_slow" else "HBM bandwidth"))
        else:
            ax.set_xlabel(label("fraction") + f" ({meta.get('layer', 'any')} layer)")
            ax.set_title("links down" if k == "down" else
                         f"links degraded to {f or '0.25'} of their bandwidth")
    axes[0][0].set_ylabel(label("slowdown"))
    # slowdowns set by timers reach 1000x beside 1.3x: a log axis keeps both readable
    _log_if_wide(axes[0][0], [r[k] for r in rows for k in ("median", "p90", "p99")], axis="y")
    if len(cases) > 5:  # many cases: the legend beside the panels, not over the lines
        axes[0][-1].legend(title="workload", loc="upper left", bbox_to_anchor=(1.02, 1.0),
                           fontsize=8)
    else:
        axes[0][0].legend(title="workload", loc="upper left")
    fig.suptitle(f"{meta.get('name', '')}: median slowdown, band to p90, dotted p99", fontsize=10)
    return written + _save(fig, out / "slowdown_by_case")
