"""Sweep files: a scenario plus a ``[sweep]`` table (or several ``[[sweep]]`` blocks).

A block's keys are axes; each axis is one of
- ``"PATH" = [v1, v2, ...]`` or a range string: PATH is a dotted scenario path
  (``topology.link_gbps``, ``workload.bytes``, ``faults.0.at_us``); the column in the result
  table is PATH, or NAME when the key is written ``"PATH as NAME"``;
- ``[[sweep.NAME]]`` tables (an array of tables under a name that is not a scenario field): a
  *bundle* axis, each table a set of dotted-path settings applied together, with an optional
  ``label`` that becomes the value of column NAME (for settings that only make sense together,
  e.g. a fabric kind with its own parameter names). A table value there replaces the whole
  table (``topology = {kind = "fullflat", n_gpus = 64}``); quote dotted keys to change one
  field (``"topology.link_gbps" = 400``).

Reserved block keys: ``mode`` = "grid" (default; every combination, last axis fastest), "zip"
(axes of equal length, taken in step) or "sample" (``n`` distinct grid points drawn with
``sample_seed``, default 0); ``set``: a table of dotted paths fixed for this block before the
axes apply (e.g. a whole ``topology`` table). Several ``[[sweep]]`` blocks over one base
scenario give the union of their points.

Within a block, each scenario path is set by one axis (an axis that replaces a whole table
after another set a field of it is refused too), a grid axis lists each value once (zip: each
point once), and no column takes the name of a result column its rows hold (``makespan_us``):
any of these would label rows with values that did not run.

Ranges: ``"1MiB..1GiB x4"`` (geometric, factor 4; sizes with a unit become integer bytes),
``"100..800 x2"``, ``"4..16 +4"`` (linear step), ``"1..8"`` (step 1, or x2 for sizes with
units). Ends are included when a step lands on them and never exceeded.
"""
from __future__ import annotations

from collections.abc import Sequence

import json
import math
import re
import sys
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation, localcontext

from netcosim import units
from netcosim.units import is_int, short_repr
from netcosim.scenario import TOP_KEYS, parse_override, read_file
from topo.errors import InputError

MODES = ("grid", "zip", "sample")
RESERVED = ("mode", "n", "sample_seed", "set", "columns")
PLOT_KEYS = ("kind", "x", "y", "metric", "hue", "facet", "where", "title", "name")
PLOT_KINDS = ("line", "heatmap")
# points a sweep may hold (docs/sweeps.md): counted from the axes before anything is expanded,
# so a typo such as x1.0001 or a 10^12-point grid is refused at once
MAX_POINTS = 1_000_000


@dataclass
class Axis:
    column: str  # name of the column in the result table
    values: list  # the value of the column for each choice
    settings: list  # per choice: [(path, value), ...] applied to the scenario
    key: str  # as written in the file, for messages


@dataclass
class Block:
    axes: list[Axis]
    mode: str = "grid"
    n: int | None = None
    sample_seed: int = 0
    fixed: list = field(default_factory=list)  # [(path, value)] from `set`
    constants: dict = field(default_factory=dict)  # `columns`: the same value on every row
    where: str = "sweep"


@dataclass
class SweepSpec:
    base: dict  # the scenario table without [sweep]
    blocks: list[Block]
    source: str | None = None
    plots: list = field(default_factory=list)  # [[plot]] figures the file asks for


    @property
    def columns(self) -> list[str]:
        seen = []
        for b in self.blocks:
            for a in b.axes:
                if a.column not in seen:
                    seen.append(a.column)
            for c in b.constants:
                if c not in seen:
                    seen.append(c)
        return seen


def load_sweep(path) -> SweepSpec:
    data = read_file(path)
    return parse_sweep(data, source=str(path))


def parse_sweep(data: dict, source: str | None = None) -> SweepSpec:
    if "sweep" not in data:
        raise InputError("sweep: missing; a sweep file is a scenario plus a [sweep] table of "
                         "dotted scenario paths, e.g. \"topology.link_gbps\" = [100, 400]")
    raw = data["sweep"]
    base = {k: v for k, v in data.items() if k not in ("sweep", "plot")}
    plots = parse_plots(data.get("plot", []))
    if isinstance(raw, dict):
        blocks = [parse_block(raw, "sweep")]
    elif isinstance(raw, list) and raw and all(isinstance(b, dict) for b in raw):
        blocks = [parse_block(b, f"sweep[{i}]") for i, b in enumerate(raw)]
    else:
        raise InputError(f"sweep = {short_repr(raw)}: expected a table ([sweep]) or an array of "
                         f"tables ([[sweep]])")
    spec = SweepSpec(base, blocks, source, plots)
    check_column_names(spec)
    check_plot_columns(plots, spec.columns, result_columns(spec))
    return spec


def parse_plots(raw) -> list[dict]:
    """``[[plot]]`` tables, the figures ``netcosim plot`` draws for this sweep:
    kind = "line": ``y`` (a metric or a list of them) against column ``x``, a line per value
    of ``hue``, a panel per value of ``facet``; kind = "heatmap": ``metric`` over columns
    ``x`` and ``y``, a panel per value of ``facet``. ``where`` keeps the rows whose column
    has the given value (or one of a list); rows without that column are kept. Rows that
    differ in any other swept column are combined by their median."""
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list) or not all(isinstance(p, dict) for p in raw):
        raise InputError(f"plot = {short_repr(raw)}: expected [[plot]] tables")
    out = []
    for i, p in enumerate(raw):
        at = f"plot[{i}]"
        for k in p:
            if k not in PLOT_KEYS:
                raise InputError(f"{at}.{k}: unknown key (allowed: {', '.join(PLOT_KEYS)})")
        kind = p.get("kind", "line")
        if kind not in PLOT_KINDS:
            raise InputError(f"{at}.kind = {kind!r}: expected one of {', '.join(PLOT_KINDS)}")
        for k in ("x", "y"):
            if k not in p:
                raise InputError(f"{at}.{k}: missing")
        ys = p["y"] if isinstance(p["y"], list) else [p["y"]]
        # at least one column, each a name: y = [] drew nothing and was accepted
        if not ys or not all(isinstance(y, str) for y in ys):
            raise InputError(f"{at}.y = {short_repr(p['y'])}: expected a column name or a "
                             f"non-empty list of them")
        if kind == "heatmap":
            if len(ys) != 1 or "metric" not in p:
                raise InputError(f"{at}: a heatmap takes x and y (two columns) and metric")
            ys = ys[0]
        elif "metric" in p:
            raise InputError(f"{at}.metric: only a heatmap takes metric (a line plot: y)")
        for k in ("x", "hue", "facet", "title", "name", "metric"):
            if k in p and not isinstance(p[k], str):
                raise InputError(f"{at}.{k} = {p[k]!r}: expected a column name (a string)")
        where = p.get("where", {})
        if not isinstance(where, dict):
            raise InputError(f"{at}.where = {short_repr(where)}: expected a table column -> value(s)")
        if "name" in p and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,150}", p["name"]):
            raise InputError(f"{at}.name = {p['name']!r}: expected a plain file-name stem "
                             f"(letters, digits, '.', '_', '+', '-'; no '/')")
        out.append({**p, "kind": kind, "y": ys, "where": where})
    return out


# The result columns of a sweep row, where they are known before the run: every row's
# (netcosim/sweep/worker.py, table.py), summary.json's (netcosim/outputs.summary), each
# engine's info and each workload kind's figures. A kind or engine not listed here has columns
# only its run knows: then result columns are checked by `netcosim plot` after the run.
# tests/test_reliability.py runs each listed kind on each engine and compares.
ROW_COLUMNS = ("point", "point_id", "status", "error", "run_s", "cpu_s", "engine", "routing",
               "seed", "makespan_us", "hosts", "switches", "links", "nodes", "transfers",
               "transfers_finished", "network_detail_used", "stream_shared_links", "engine_flows",
               "transfers_represented", "stranded", "unfinished", "bytes", "fault_events",
               "events", "wall_s")
ENGINE_COLUMNS = {
    "flow": ("compile_s", "setup_s", "loop_s", "wall_total_s", "time_steps", "recomputes",
             "solved_flows", "skipped_recomputes", "local_repairs", "local_repairs_given_up",
             "local_repair_rounds", "cap_events", "slot_layouts", "slots", "events_per_s",
             "stranded_no_path", "gave_up_no_path", "link_classes", "links_used", "member_sets",
             "split_pieces"),
    "packet": ("transport", "mtu", "mss", "events_per_s", "event_numbers", "reroutes",
               "reroute_wall_s", "drops", "ecn_marks", "retransmissions", "headroom_violations",
               "peak_packets", "peak_pending_events", "end_time_s", "deadlock_at_s",
               "deadlocked_ports", "tcp_gave_up"),
}
WORKLOAD_COLUMNS = {
    "flows": (),
    "collective": ("op", "algorithm", "protocol", "ranks", "message_bytes", "algbw_GBps",
                   "busbw_GBps"),
}

# The figures of the kinds whose columns result_columns leaves to the run (their reports:
# compute/report.summarize and netcosim/plan.resolve_best, netcosim/inference/metrics.py and
# disagg.py, netcosim/interop/workload.report), as far as they are known. Used only to refuse a
# swept column of the same name, which would replace the result in every row (table._table_row)
# and could not be told apart afterwards; tests/test_sweep_axes_names.py runs the kinds and
# checks their rows are covered.
_EXPOSED = ("tp", "cp", "ep", "pp", "dp", "dp_ag")  # netcosim/plan.KINDS
_STATS = ("mean", "p50", "p90", "p99")  # netcosim/inference/metrics._stats
TRAINING_COLUMNS = (
    "step_time_s", "tokens_per_s", "mfu", "hfu", "compute_s_per_gpu", "exposed_comm_total_s",
    "idle_s_per_gpu", "symmetry", "tp_comm", "simulated_ranks", "folded_replicas",
    "symmetry_uneven_sends", "n_gpus", "unfinished_nodes",
    *(f"exposed_{k}_s" for k in _EXPOSED),
    *(f"memory_{k}" for k in ("weights_GB", "grads_GB", "optimizer_GB", "activations_GB",
                              "total_GB", "capacity_GB", "stage")))
# a layout search's rows (parallel = "best") add the chosen layout: only those have them, so
# "workload.parallel.tp as tp" stays a plain axis of a fixed-layout training sweep
PLAN_COLUMNS = ("layout", "tp", "pp", "dp", "cp", "ep", "sp", "vp", "micro_batch", "dist_opt",
                "recompute", "plan_feasible", "plan_simulated")
_POOL = ("iterations", "comm_share", "mean_batch_seqs")
INFERENCE_COLUMNS = (
    "requests", "input_tokens", "output_tokens", "serving_span_s", "request_rate_rps",
    "output_tokens_per_s", "output_tokens_per_s_per_gpu", "slo", "slo_attainment",
    "goodput_rps", *_POOL, "prefill_tokens_per_iteration", "model", "gpu", "precision", "tp",
    "pp", "ep", "dp", "gpus", "kv_capacity_tokens", "weights_GB_per_gpu",
    "kv_bytes_per_token_per_gpu",
    *(f"{p}_{s}_s" for p in ("ttft", "itl", "tpot", "e2e", "ttft_prefill", "kv_transfer",
                             "decode_first_token") for s in _STATS),
    # disaggregated serving (prefill and decode pools)
    "disaggregated", "kv_transfer_bytes_mean", "kv_transfer_bytes_total",
    "kv_transfer_bytes_per_token", "kv_transfer_gpu_pairs", "prefill_kv_capacity_tokens",
    *(f"{pool}_{k}" for pool in ("prefill", "decode")
      for k in (*_POOL, "busy_s", "tp", "pp", "ep", "dp", "gpus")))
RUN_ONLY_COLUMNS = {"training": TRAINING_COLUMNS, "inference": INFERENCE_COLUMNS,
                    "chakra": ("step_time_s", "ranks")}


def _kinds_of(spec: "SweepSpec", table: str, default) -> set | None:
    """Every ``kind`` the sweep's points may have in ``table`` (workload, engine); None when an
    axis sets it in a way that cannot be read without expanding."""
    kinds = _field_values(spec, table, "kind", default)
    # a kind that is not a name (a list, a table) is the points' check's to refuse
    if kinds is None or not all(k is None or isinstance(k, str) for k in kinds):
        return None
    return set(kinds)


def _field_values(spec: "SweepSpec", table: str, key: str, default) -> list | None:
    """Every value ``table.key`` may take in the sweep's points; None when a setting replaces
    ``table`` with something that is not a table."""
    base = spec.base.get(table)
    values = [base.get(key, default) if isinstance(base, dict) else default]
    for b in spec.blocks:
        sets = [b.fixed] + [st for a in b.axes if not _other_path(a.settings, table, key)
                            for st in a.settings]
        for settings in sets:
            for path, value in settings:
                if path == [table]:
                    if not isinstance(value, dict):
                        return None
                    values.append(value.get(key, default))
                elif path == [table, key]:
                    values.append(value)
    return values


def _other_path(settings, table: str, key: str = "kind") -> bool:
    """An axis that only sets a path other than ``table.key`` (no need to look at each
    value)."""
    return isinstance(settings, OnePathSettings) and settings.path not in ([table],
                                                                          [table, key])


def result_columns(spec: "SweepSpec") -> set | None:
    """Result columns every point of the sweep may have, or None when they are known only
    after the run (a workload kind or engine not in the tables above)."""
    wk = _kinds_of(spec, "workload", None)
    ek = _kinds_of(spec, "engine", "flow")
    if not wk or not ek or not all(k in WORKLOAD_COLUMNS for k in wk) or \
            not all(k in ENGINE_COLUMNS for k in ek):
        return None
    cols = set(ROW_COLUMNS)
    for k in wk:
        cols.update(WORKLOAD_COLUMNS[k])
    for k in ek:
        cols.update(ENGINE_COLUMNS[k])
    return cols


def taken_columns(spec: "SweepSpec") -> set:
    """Every column name a row of this sweep may hold besides its swept columns: the row's
    own (point, status, scenario, ...), summary.json's, and the figures of each workload kind
    and engine its points may have (of every known kind when that cannot be read from the
    file). Broader than result_columns, which must not name a column a row may lack."""
    wk = _kinds_of(spec, "workload", None)
    ek = _kinds_of(spec, "engine", "flow")
    workloads = {**WORKLOAD_COLUMNS, **RUN_ONLY_COLUMNS}
    if not wk or not wk <= workloads.keys():
        wk = set(workloads)
    if not ek or not ek <= ENGINE_COLUMNS.keys():
        ek = set(ENGINE_COLUMNS)
    cols = set(ROW_COLUMNS) | {"scenario"}
    for k in wk:
        cols.update(workloads[k])
    for k in ek:
        cols.update(ENGINE_COLUMNS[k])
    if "training" in wk:
        searched = _field_values(spec, "workload", "parallel", None)
        if searched is None or "best" in searched:
            cols.update(PLAN_COLUMNS)
    return cols


def check_column_names(spec: "SweepSpec") -> None:
    """A swept or constant column named like a result column would replace that result in
    every row (the table keeps one value per name), silently: refused, naming the axis."""
    taken = taken_columns(spec)
    for b in spec.blocks:
        for a in b.axes:
            path = a.key.partition(" as ")[0].strip()
            # an axis column that is its own path and a summary field (seed) holds the value
            # the summary echoes: the same in the row either way
            if a.column in taken and not (isinstance(a.settings, OnePathSettings)
                                          and a.column == path):
                fix = (f"name the column otherwise (\"{path} as NAME\")"
                       if isinstance(a.settings, OnePathSettings) else "rename the bundle")
                raise InputError(f"{_at(b.where, a.key)}: {a.column!r} is a result column of "
                                 f"this sweep's rows (the swept values would replace the "
                                 f"results); {fix}")
        for c in b.constants:
            if c in taken:
                raise InputError(f"{b.where}.columns.{c}: {c!r} is a result column of this "
                                 f"sweep's rows (the constant would replace the results); "
                                 f"name the column otherwise")


def check_plot_columns(plots: list, columns: list, results: set | None = None) -> None:
    """A [[plot]] column written as a dotted scenario path (``topology.k``) must be one the
    sweep varies; another name must be a result column of the sweep's workload kinds and
    engines (``results``) when those are known before the run, else ``netcosim plot`` checks
    it against the table it reads."""
    for i, sp in enumerate(plots):
        named = [(k, sp.get(k)) for k in ("x", "hue", "facet")]
        if sp["kind"] == "heatmap":
            named.append(("y", sp["y"]))
            named.append(("metric", sp.get("metric")))
        else:
            named += [("y", y) for y in sp["y"]]
        named += [("where", c) for c in sp["where"]]
        for key, c in named:
            if not isinstance(c, str):
                continue
            if "." in c and c not in columns:
                raise InputError(f"plot[{i}].{key} = {c!r}: not a column of this sweep "
                                 f"(swept: {', '.join(columns) or 'none'})")
            if "." not in c and results is not None and c not in columns and c not in results:
                owner = [k for k, v in WORKLOAD_COLUMNS.items() if c in v] + \
                        [f"the {k} engine" for k, v in ENGINE_COLUMNS.items() if c in v]
                why = (f"a result of {' and '.join(owner)} runs only" if owner else
                       "neither a swept column nor a result column")
                raise InputError(f"plot[{i}].{key} = {c!r}: {why}; this sweep's columns are "
                                 f"{', '.join(columns) or 'none'} and its results "
                                 f"{', '.join(sorted(results - set(ROW_COLUMNS[:6])))}")


def parse_block(table: dict, where: str) -> Block:
    mode = table.get("mode", "grid")
    if mode not in MODES:
        raise InputError(f"{where}.mode = {mode!r}: expected one of {', '.join(MODES)}")
    n = table.get("n")
    if mode == "sample":
        if not is_int(n) or n < 1:
            raise InputError(f"{where}.n = {n!r}: mode = \"sample\" needs n, a number of points "
                             f">= 1")
    elif n is not None:
        raise InputError(f"{where}.n = {n!r}: only mode = \"sample\" takes n")
    seed = table.get("sample_seed", 0)
    if not is_int(seed) or seed < 0:
        raise InputError(f"{where}.sample_seed = {seed!r}: expected an integer >= 0")
    fixed = []
    if "set" in table:
        s = table["set"]
        if not isinstance(s, dict):
            raise InputError(f"{where}.set = {short_repr(s)}: expected a table of dotted paths")
        for key, value in s.items():  # a table value replaces the whole table
            fixed.append((_path(key, f"{where}.set"), value))
    constants = table.get("columns", {})
    if not isinstance(constants, dict) or any(isinstance(v, (dict, list))
                                              for v in constants.values()):
        raise InputError(f"{where}.columns = {short_repr(constants)}: expected a table of column "
                         f"name -> value, the same on every row of this block")
    axes = []
    for key, value in _axis_items(table, where):
        axes.append(_axis(key, value, where))
    if not axes:
        raise InputError(f"{where}: no axis; add dotted scenario paths with lists or ranges, "
                         f"e.g. \"workload.bytes\" = \"1MiB..1GiB x4\"")
    cols = [a.column for a in axes]
    dup = next((c for c in cols if cols.count(c) > 1), None)
    if dup is not None:
        raise InputError(f"{where}: column {dup!r} is swept twice")
    _check_paths(axes, where)
    if mode == "zip":
        lens = {a.key: len(a.values) for a in axes}
        if len(set(lens.values())) > 1:
            shown = ", ".join(f"{k} has {v}" for k, v in lens.items())
            raise InputError(f"{where}: mode = \"zip\" takes axes of equal length ({shown})")
        _check_zip_repeats(axes, where)
    else:
        for a in axes:
            _check_repeats(a, where)
    clash = next((a.column for a in axes if a.column in constants), None)
    if clash is not None:
        raise InputError(f"{where}.columns.{clash}: also an axis of this block")
    return Block(axes, mode, n, seed, fixed, constants, where)


def _axis_paths(axis: Axis) -> list[tuple]:
    """The scenario paths an axis sets (a bundle: those of all its cases)."""
    if isinstance(axis.settings, OnePathSettings):
        return [tuple(axis.settings.path)]
    return list(dict.fromkeys(tuple(p) for st in axis.settings for p, _ in st))


def _check_paths(axes: list, where: str) -> None:
    """Axes are applied in order (points._point), the last setting of a path winning: two axes
    on one path, or one that replaces the table an earlier one set a field of, would label rows
    with values that did not run (and two points of one scenario share one run)."""
    owner: dict[tuple, str] = {}  # path -> key of the first axis that sets it
    for a in axes:
        mine = _axis_paths(a)
        for p in mine:
            text = ".".join(map(str, p))
            for q, key in owner.items():
                if q == p:
                    raise InputError(f"{where}: {text} is swept twice ({key!r} and "
                                     f"{a.key!r})")
                if q[:len(p)] == p:
                    raise InputError(f"{where}: {a.key!r} sets {text}, which replaces "
                                     f"{'.'.join(map(str, q))} swept by {key!r} before it (its "
                                     f"column would not hold the values that ran); put the "
                                     f"table in the block's `set` or in the same axis")
        for p in mine:
            owner.setdefault(p, a.key)


def _value_key(v):
    """Two axis values that give one column value (100 and 100.0, "1MiB" and 1048576) are one
    value; bools are kept apart from 1 and 0."""
    from netcosim.sweep.points import column_value

    v = column_value(v)
    if isinstance(v, (dict, list)):
        return ("json", json.dumps(v, sort_keys=True, default=str))
    return (isinstance(v, bool), v)


def _numbers(values) -> bool:
    """Plain numbers only (a range's values): a set finds their repeats, quickly enough for a
    million-value range."""
    return all(type(v) in (int, float) for v in values)


def _first_repeat(columns: list) -> tuple[int, int] | None:
    """(i, j), i < j, of the first point j whose values (one list per axis, taken together)
    are point i's again; None when every point is listed once."""
    if all(_numbers(c) for c in columns) and len(set(zip(*columns))) == len(columns[0]):
        return None
    seen = {}
    for j, values in enumerate(zip(*columns)):
        k = tuple(_value_key(v) for v in values)
        if k in seen:
            return seen[k], j
        seen[k] = j
    return None


def _check_repeats(axis: Axis, where: str) -> None:
    """A value listed twice on a grid axis gives every point with it twice: almost certainly a
    slip, and rows no reader could tell apart (bundles have their own check on labels)."""
    if not isinstance(axis.settings, OnePathSettings):
        return
    r = _first_repeat([axis.values])
    if r is not None:
        first, v = axis.values[r[0]], axis.values[r[1]]
        same = "" if repr(first) == repr(v) else f" (as {short_repr(first)} before)"
        raise InputError(f"{_at(where, axis.key)}: {short_repr(v)} is listed twice{same}")


def _check_zip_repeats(axes: list, where: str) -> None:
    """mode = "zip": an axis may repeat a value, a point (the values taken together) may not."""
    r = _first_repeat([a.values for a in axes])
    if r is not None:
        i, j = r
        shown = ", ".join(f"{a.column}={short_repr(a.values[j])}" for a in axes)
        raise InputError(f"{where}: mode = \"zip\" point {j} repeats point {i} ({shown})")


def _axis_items(table: dict, where: str):
    """(key, value) pairs of the axes, with unquoted nested tables (``topology.k = [...]`` in
    TOML makes {"topology": {"k": [...]}}) flattened to dotted keys."""
    for key, value in table.items():
        if key in RESERVED:
            continue
        head = key.split(" as ")[0].strip().split(".")[0]
        if isinstance(value, dict) and head in TOP_KEYS:
            yield from _flatten(value, key)
        else:
            yield key, value


def _flatten(table: dict, prefix: str):
    """Axis values are lists or strings, never tables, so every table met here is a level of
    an unquoted dotted key."""
    for k, v in table.items():
        full = f"{prefix}.{k}"
        if isinstance(v, dict):
            yield from _flatten(v, full)
        else:
            yield full, v


def _at(where: str, key: str) -> str:
    """An axis as messages name it: sweep.'topology.k as k', sweep.gpus."""
    return f"{where}.{key!r}" if "." in key or " " in key else f"{where}.{key}"


def _axis(key: str, value, where: str) -> Axis:
    at = _at(where, key)
    path_text, _, alias = key.partition(" as ")
    path_text, alias = path_text.strip(), alias.strip()
    if " as " in key and not alias:
        raise InputError(f"{at}: nothing after 'as' (write \"PATH as NAME\")")
    head = path_text.split(".")[0]
    if head not in TOP_KEYS:
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return _bundle(path_text if not alias else alias, value, at, key)
        raise InputError(f"{at}: {path_text!r} names no scenario field (a sweep key is a dotted "
                         f"path that starts with one of {', '.join(TOP_KEYS)}, e.g. "
                         f"topology.link_gbps)")
    path = _path(path_text, at)
    values = expand_values(value, at)
    return Axis(alias or path_text, values, OnePathSettings(path, values), key)


class OnePathSettings(Sequence):
    """The settings of an axis that sets one path, ``[(path, values[i])]`` per choice, made on
    demand: a million-value range does not become a million lists before the point count is
    checked."""

    def __init__(self, path: list, values: list):
        self.path, self.values = path, values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [[(self.path, v)] for v in self.values[i]]
        return [(self.path, self.values[i])]


def _bundle(name: str, tables: list, at: str, key: str) -> Axis:
    labels, settings = [], []
    for i, t in enumerate(tables):
        lab = t.get("label", f"{name}{i}")
        if not isinstance(lab, (str, int, float)) or isinstance(lab, bool):
            raise InputError(f"{at}[{i}].label = {lab!r}: expected a string or a number")
        # A table value (``topology = {kind = ...}``) replaces the whole table.
        entries = [(k, v) for k, v in t.items() if k != "label"]
        if not entries:
            raise InputError(f"{at}[{i}]: no settings (dotted scenario paths) in this case")
        st = []
        for k, v in entries:
            if k.split(".")[0] not in TOP_KEYS:
                raise InputError(f"{at}[{i}].{k}: {k!r} names no scenario field")
            st.append((_path(k, f"{at}[{i}]"), v))
        labels.append(lab)
        settings.append(st)
    if len(set(map(str, labels))) < len(labels):
        raise InputError(f"{at}: two cases have the same label")
    return Axis(name, labels, settings, key)


def _path(text: str, at: str) -> list:
    keys, _ = parse_override(f"{text}=0")
    if isinstance(keys[0], str) and keys[0] not in TOP_KEYS:
        raise InputError(f"{at}: {text!r} names no scenario field")
    return keys


# =========================================================================== values and ranges
_RANGE = re.compile(r"^\s*(?P<lo>[^\s.][^\s]*?|[.][0-9][^\s]*?)\s*\.\.\s*(?P<hi>[^\s]+?)\s*"
                    r"(?:(?P<op>[xX*+])\s*(?P<step>[^\s]+))?\s*$")

_PLAIN = re.compile(r"[+-]?(?:[0-9]+[.]?[0-9]*|[.][0-9]+)(?:[eE][+-]?[0-9]+)?")  # a number, no unit


def expand_values(value, at: str) -> list:
    """The list of values an axis takes: a list as given, a range string expanded, or one
    scalar."""
    if isinstance(value, list):
        if not value:
            raise InputError(f"{at} = []: the list of values is empty")
        return list(value)
    if isinstance(value, str) and ".." in value:
        return parse_range(value, at)
    if isinstance(value, dict):
        return [value]
    return [value]


def parse_range(text: str, at: str) -> list:
    m = _RANGE.match(text)
    if not m:
        raise InputError(f"{at} = {text!r}: expected a range such as \"1MiB..1GiB x4\", "
                         f"\"100..800 x2\" or \"4..16 +4\"")
    lo_t, hi_t, op, step_t = m.group("lo"), m.group("hi"), m.group("op"), m.group("step")
    # a unit makes the ends sizes; the "e" of an exponent is not one ("1e0..3e0 +0.5" is 1, 1.5,
    # .. 3, not the whole byte counts 1, 2, 3)
    sized = not (_PLAIN.fullmatch(lo_t) and _PLAIN.fullmatch(hi_t))
    if sized:
        try:
            lo = units.parse_bytes(lo_t, f"{at} (start of {text!r})", allow_zero=False)
            hi = units.parse_bytes(hi_t, f"{at} (end of {text!r})", allow_zero=False)
        except InputError as e:  # "1us..4us": a range's only units are sizes
            raise InputError(f"{e}; a range's ends take size units only: write a time or a "
                             f"rate as plain numbers in the unit of the key's name "
                             f"(\"1..4 x2\" for 1, 2 and 4 us on a key ending in _us)") from None
    else:
        lo, hi = _number(lo_t, at, text), _number(hi_t, at, text)
    if hi < lo:
        raise InputError(f"{at} = {text!r}: the range is empty (end < start)")
    if op is None:
        op, step = ("x", 2) if sized else ("+", 1)
    elif op == "+":
        step = (units.parse_bytes(step_t, f"{at} (step of {text!r})", allow_zero=False)
                if sized and not _PLAIN.fullmatch(step_t) else _number(step_t, at, text))
        if not step > 0:
            raise InputError(f"{at} = {text!r}: the step must be > 0")
    else:
        op, step = "x", _number(step_t, at, text)
        if not step > 1:
            raise InputError(f"{at} = {text!r}: the factor x{step_t} must be > 1")
    if op == "x" and not lo > 0:
        raise InputError(f"{at} = {text!r}: a geometric range must start above 0")
    exact = all(isinstance(v, int) for v in (lo, hi, step))
    # ends near the float range: hi / lo or hi - lo overflowed to inf (or an OverflowError of
    # an int quotient) and math.floor(inf) stopped the CLI with "internal error" (exit 1)
    try:
        span = math.log(hi / lo, step) if op == "x" else (hi - lo) / step
        if not math.isfinite(span):
            span = ((math.log(hi) - math.log(lo)) / math.log(step) if op == "x"
                    else hi / step - lo / step)
    except OverflowError:
        span = math.inf
    # floor(span + 1e-9) + 1 values: more than MAX_POINTS exactly when span + 1e-9 reaches it
    if not span + 1e-9 < MAX_POINTS:
        raise InputError(f"{at} = {short_repr(text)}: more values than a sweep can hold "
                         f"({MAX_POINTS})")
    count = math.floor(span + 1e-9) + 1
    if not exact and not sized:
        # the count's 1e-9 slack (for the rounding of hi / lo) also took in a value past an end
        # just short of a step: "1..2.9999999999" gave 1, 2, 3 (docs/sweeps.md: the end is
        # never exceeded); the texts are decimals, so the values are checked exactly
        dl, dh = Decimal(lo_t), Decimal(hi_t)
        ds = Decimal(step_t) if m.group("op") else Decimal(step)
        with localcontext() as ctx:
            ctx.prec = 800
            while count > 1 and (dl * ds ** (count - 1) if op == "x"
                                 else dl + (count - 1) * ds) > dh:
                count -= 1
    if exact:
        out = [lo]
        while True:
            nxt = out[-1] * step if op == "x" else out[-1] + step
            if nxt > hi:
                return out
            out.append(nxt)
    # Floats: each value computed from the start (no accumulated rounding), then rounded to
    # 12 significant digits so "0.1..0.5 +0.1" gives 0.3, not 0.30000000000000004.
    try:
        vals = [lo * step ** i if op == "x" else lo + i * step for i in range(count)]
    except OverflowError:
        vals = [math.inf]
    if not all(map(math.isfinite, vals)):  # step ** i or i * step beyond the float range
        dl, ds = Decimal(lo), Decimal(step)  # while the value is within it
        with localcontext() as ctx:  # i * step exact (a double has at most 767 digits)
            ctx.prec = 800 if op == "+" else 40
            vals = [float(dl * ds ** i if op == "x" else dl + i * ds) for i in range(count)]
    if sized:
        # sizes are whole bytes (docs/sweeps.md): "1MiB..10MiB x1.3" made 1363148.8 and the
        # sweep was refused ("a size must be a whole number of bytes"), "1KiB..8KiB x1.5"
        # gave floats (1536.0); rounding may make neighbours equal ("1B..8B x1.1"): once each
        return list(dict.fromkeys(min(hi, round(v)) for v in vals))
    return [float(f"{v:.12g}") for v in vals]


_FLOAT_MAX = Decimal(sys.float_info.max)


def _number(t: str, at: str, text: str):
    try:
        d = Decimal(t)
    except InvalidOperation:
        raise InputError(f"{at} = {text!r}: {t!r} is not a number") from None
    if not d.is_finite():
        raise InputError(f"{at} = {text!r}: {t!r} is not a finite number")
    if abs(d) > _FLOAT_MAX:  # the count of values is float arithmetic: an end of 1e400
        # written out stopped the CLI with "internal error: OverflowError" (exit 1)
        raise InputError(f"{at} = {short_repr(text)}: {short_repr(t, 30)} is beyond the range "
                         f"of a number (at most about 1.8e308)")
    if d == d.to_integral_value() and re.fullmatch(r"[+-]?[0-9]+", t):
        return int(d)
    return float(d)


