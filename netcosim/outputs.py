"""The files `netcosim run` writes: summary.json, flows.csv, links.csv (DESIGN.md contract).

Everything is written into a temporary directory beside the target and moved into place at the
end, so an interrupted run never leaves half-written files. The CSV files are a pure function
of the scenario and seed (fixed column order, shortest round-trip float text), so two runs give
bit-for-bit identical files; wall-clock figures live only in summary.json.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

OUTPUT_FILES = ("summary.json", "flows.csv", "links.csv", "link_series.csv")
FLOW_COLUMNS = ("id", "src", "dst", "bytes", "start_us", "end_us", "stranded")
LINK_COLUMNS = ("u", "v", "bytes", "busy_us", "utilization")


# =========================================================================== text columns
# A table is (header, columns). A column is an int64 array (decimal text), a float64 array
# (repr() text: the shortest text that reads back to the same double; NaN, which never
# happens, is empty), a bool array ("1"/"0"), a ``Labels`` (codes into a few names) or a list
# of str. Text is made when the file is written, in blocks of rows, by compiled loops
# (netcosim/_csvtext_cpp) with no Python per row; ``_text_py`` is the same text in Python.
try:
    from netcosim import _csvtext
except ImportError:  # not built: the same text through Python
    _csvtext = None

class Labels:
    """A column of names given as small-integer codes into ``names``."""

    def __init__(self, codes, names):
        self.codes = np.asarray(codes, dtype=np.int64)
        self.names = [str(x) for x in names]

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, sl):
        return Labels(self.codes[sl], self.names)


class Computed:
    """A column of ``n`` rows made block by block when the file is written: ``rows(lo, hi)``
    returns the int64 or float64 array of rows lo..hi-1. A table of hundreds of millions of
    rows (link_series.csv of a 65,536-GPU step: about 196 M) then never exists whole in
    memory, only its block of ``BLOCK_ROWS``; its five columns built at once took 12.7 GB."""

    def __init__(self, n: int, rows):
        self.n, self.rows = int(n), rows

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, sl):
        lo, hi, step = sl.indices(self.n)
        if step != 1:
            raise ValueError("a computed column is read in contiguous blocks")
        return self.rows(lo, hi)


def _ints(a) -> np.ndarray:
    return np.asarray(a).astype(np.int64)


def _floats(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _column(a):
    a = np.asarray(a)
    if a.dtype == bool:
        return a
    if np.issubdtype(a.dtype, np.integer):
        return _ints(a)
    if np.issubdtype(a.dtype, np.floating):
        f = a.astype(np.float64)
        # Whole-number columns (bytes on a single-path run) read better without ".0".
        if np.all(np.isfinite(f)) and np.all(f == np.round(f)) and np.all(np.abs(f) < 2**53):
            return _ints(f)
        return _floats(f)
    return [str(x) for x in a.tolist()]


def _csr(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in parts], out=off[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), off


def _text_py(col) -> list[str]:
    """The text of every row of a column, in Python (reference for the compiled path)."""
    if isinstance(col, Labels):
        return [col.names[c] for c in col.codes.tolist()]
    if isinstance(col, np.ndarray):
        if col.dtype == bool:
            return ["1" if x else "0" for x in col.tolist()]
        if col.dtype == np.float64:
            return ["" if x != x else repr(x) for x in col.tolist()]
        return [str(x) for x in col.tolist()]
    return [str(x) for x in col]


def _text(col) -> tuple[np.ndarray, np.ndarray]:
    """(buf, off): the bytes of every row of a column (row i is buf[off[i]:off[i+1]])."""
    if isinstance(col, Labels):
        name_buf, name_off = _csr([x.encode() for x in col.names])
        lens = np.diff(name_off)[col.codes]
        off = np.zeros(len(col.codes) + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        # byte k of row i comes from byte (k - off[i]) of its name
        src = np.repeat(name_off[col.codes] - off[:-1], lens) + np.arange(off[-1])
        return name_buf[src], off
    if isinstance(col, np.ndarray) and col.dtype == bool:
        return np.where(col, ord("1"), ord("0")).astype(np.uint8), \
            np.arange(len(col) + 1, dtype=np.int64)
    if isinstance(col, np.ndarray) and _csvtext is not None:
        if col.dtype == np.float64:
            return _csvtext.format_floats(col)
        if col.dtype == np.int64:
            return _csvtext.format_ints(col)
    return _csr([x.encode() for x in _text_py(col)])


BLOCK_ROWS = 1 << 18  # rows formatted at a time: bounded memory, few Python steps


def _rows(columns, lo: int, hi: int) -> bytes:
    if _csvtext is not None:
        return _csvtext.join_rows([_text(c[lo:hi]) for c in columns])
    texts = [_text_py(c[lo:hi]) for c in columns]
    return "".join(",".join(r) + "\n" for r in zip(*texts)).encode()


def _write_csv(path: Path, header, columns) -> None:
    n = len(columns[0]) if columns else 0
    with open(path, "wb") as fh:
        fh.write((",".join(header) + "\n").encode())
        for lo in range(0, n, BLOCK_ROWS):
            fh.write(_rows(columns, lo, min(n, lo + BLOCK_ROWS)))


def _json_safe(v):
    """JSON without NaN/Infinity (not valid JSON): they become null."""
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.ndarray):
        return _json_safe(v.tolist())
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)


# =========================================================================== contents
def flows_table(schedule, result, topology=None) -> tuple[list, list]:
    """Header and columns of flows.csv: one row per transfer node, in node-id order."""
    from netcore.schedule import TRANSFER

    t = np.flatnonzero(schedule.kind == TRANSFER)
    header = list(FLOW_COLUMNS)
    cols = [_ints(t), _ints(schedule.src[t]), _ints(schedule.dst[t]), _ints(schedule.size[t]),
            _floats(result.start[t] * 1e6), _floats(result.end[t] * 1e6),
            _column(np.asarray(result.stranded, dtype=bool)[t])]
    if len(schedule.labels) > 1:
        header.append("label")
        cols.append(Labels(schedule.label[t], schedule.labels))
    if schedule.has_members or (schedule.steps[t] > 1).any():
        # a row stands for `members` connections each carrying `bytes` in all, as `steps`
        # transfers in series (schedule.size is a stream's bytes over all its steps)
        header += ["members", "steps"]
        cols += [_ints(schedule.members_per_node()[t]), _ints(schedule.steps[t])]
    n = schedule.n
    for name in sorted(result.node_extra):
        if name.startswith("path_") or name in header:  # paths: the `path` column below
            continue
        arr = np.asarray(result.node_extra[name])
        if arr.ndim == 1 and len(arr) == n:
            name, arr = _in_us(name, arr)
            header.append(name)
            cols.append(_column(arr[t]))
    ex = result.node_extra
    if "path_ptr" in ex and "path_link" in ex and topology is not None:
        header.append("path")
        cols.append(_path_column(topology, t, ex["path_ptr"], ex["path_link"],
                                 ex.get("path_weight")))
    return header, cols


def _path_column(topology, t, ptr, link, weight) -> list[str]:
    """The directed links each transfer used, in order, as "u>v" tokens separated by spaces;
    a link that carried only part of the transfer (spray) is "u>v*fraction"."""
    ptr = np.asarray(ptr, dtype=np.int64)
    link = np.asarray(link, dtype=np.int64)
    names = [f"{u}>{v}" for u, v in zip(topology.dlink_src.tolist(), topology.dlink_dst.tolist())]
    tokens = [names[d] for d in link.tolist()]
    if weight is not None:
        w = np.asarray(weight, dtype=np.float64)
        for j in np.flatnonzero(w != 1.0).tolist():
            tokens[j] = f"{tokens[j]}*{float(w[j])!r}"
    lo, hi = ptr[t].tolist(), ptr[t + 1].tolist()
    return [" ".join(tokens[a:b]) for a, b in zip(lo, hi)]


def links_table(topology, result, span: float) -> tuple[list, list]:
    header = list(LINK_COLUMNS)
    util = result.link_utilization(span)
    cols = [_ints(topology.dlink_src), _ints(topology.dlink_dst), _column(result.link_bytes),
            _floats(np.asarray(result.link_busy) * 1e6), _floats(util)]
    nd = topology.n_dlinks
    for name in sorted(result.link_extra):
        if name.startswith("series_") or name in header:  # series: link_series.csv
            continue
        arr = np.asarray(result.link_extra[name])
        if arr.ndim == 1 and len(arr) == nd:
            name, arr = _in_us(name, arr)
            header.append(name)
            cols.append(_column(arr))
    return header, cols


def _in_us(name: str, arr: np.ndarray) -> tuple[str, np.ndarray]:
    """An engine counter in seconds (``pause_s``) as the files write times: microseconds
    (``pause_us``), like ``busy_us`` beside it; other counters unchanged."""
    if name.endswith("_s") and arr.dtype.kind == "f":
        return name[:-2] + "_us", arr * 1e6
    return name, arr


SERIES_KEYS = ("series_ptr", "series_t", "series_rate")


def link_series_table(topology, result) -> tuple[list, list] | None:
    """link_series.csv: the piecewise-constant load of every directed link.

    Engines that record it put a CSR per directed link in ``Result.link_extra``:
    ``series_ptr`` (n_dlinks+1), ``series_t`` (s, when the load changed) and ``series_rate``
    (bytes/s from then on). Rows are grouped by link, in time order. None when absent.
    """
    ex = result.link_extra
    if not all(k in ex for k in SERIES_KEYS):
        return None
    ptr = np.asarray(ex["series_ptr"], dtype=np.int64)
    t = np.asarray(ex["series_t"], dtype=np.float64)
    rate = np.asarray(ex["series_rate"], dtype=np.float64)
    src, dst, bw = topology.dlink_src, topology.dlink_dst, topology.dlink_bw

    def link(lo, hi):  # the directed link of rows lo..hi-1 (rows are grouped by link)
        return np.searchsorted(ptr, np.arange(lo, hi), side="right") - 1

    n = int(ptr[-1])
    return (["u", "v", "time_us", "rate_Gbps", "utilization"],
            [Computed(n, lambda lo, hi: _ints(src[link(lo, hi)])),
             Computed(n, lambda lo, hi: _ints(dst[link(lo, hi)])),
             Computed(n, lambda lo, hi: t[lo:hi] * 1e6),
             Computed(n, lambda lo, hi: rate[lo:hi] * 8 / 1e9),
             Computed(n, lambda lo, hi: rate[lo:hi] / bw[link(lo, hi)])])


def summary(scenario, prepared, result, workload_figures: dict) -> dict:
    from netcore.schedule import TRANSFER

    sched, topo = prepared.schedule, prepared.topology
    t = sched.kind == TRANSFER
    finished = np.isfinite(result.end)
    out = {
        "scenario": scenario.name,
        "engine": prepared.engine,
        "routing": scenario.policy,
        "seed": scenario.seed,
        "makespan_us": result.makespan * 1e6,
        "hosts": topo.n_hosts,
        "switches": topo.n_switches,
        "links": topo.n_links,
        "nodes": sched.n,
        "transfers": int(t.sum()),
        "transfers_finished": int((t & finished).sum()),
        # network_detail (docs/scale.md): the representation that ran, the flows the engine
        # carried and the point-to-point transfers they stand for
        "network_detail_used": sched.meta.get("network_detail_used", "full"),
        # links two connections of one ring stream share: the stream's time is then an upper
        # bound (netcosim/stream_sharing.py; 0 when exact or when the full form ran)
        "stream_shared_links": int(sched.meta.get("stream_shared_links", 0)),
        "engine_flows": int(t.sum()),
        "transfers_represented": sched.n_member_transfers,
        "stranded": int(np.count_nonzero(np.asarray(result.stranded, dtype=bool) & t)),
        "unfinished": int((~finished).sum()),
        "bytes": sched.total_bytes,
        "fault_events": len(prepared.faults),
        "events": int(result.events),
        "wall_s": float(result.wall_s),
    }
    out.update(workload_figures)
    for k, v in result.info.items():
        if k not in out:
            out[k] = v
    return _json_safe(out)


# =========================================================================== writing
def write_outputs(out_dir, summary_dict: dict, flows, links, series=None,
                  label: str | None = None) -> Path:
    """Write the files atomically into ``out_dir`` (created if needed).

    ``flows``/``links``/``series`` are (header, columns) pairs. Files of an earlier run in the
    same directory are replaced; other files there are left alone. An ``OSError`` on the way
    (the destination was checked with ``check_out_dir`` before the run) is an
    ``outpaths.OutputError`` naming ``label``; nothing half-written is left behind.
    """
    from netcosim.outpaths import OutputError

    out = Path(out_dir)
    label = label or f"--out {str(out)!r}"
    try:
        return _write_outputs(out, summary_dict, flows, links, series)
    except OSError as e:
        raise OutputError(f"{label}: cannot write the results "
                          f"({e.strerror or type(e).__name__})") from None


def check_out_dir(out_dir, label: str | None = None, inputs=()) -> Path:
    """Refuse (InputError) an output directory ``write_outputs`` could not write, or where it
    would replace one of ``inputs``, before the run: see ``netcosim.outpaths.check_dir``."""
    from netcosim.outpaths import check_dir

    return check_dir(out_dir, label or f"--out {str(out_dir)!r}", OUTPUT_FILES, inputs)


def _write_outputs(out: Path, summary_dict: dict, flows, links, series) -> Path:
    parent = out.parent if str(out.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name[:60]}.tmp-", dir=parent))
    try:
        umask = os.umask(0)  # mkdtemp makes 0700; the final directory gets the usual mode
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)
        with open(tmp / "summary.json", "w", encoding="utf-8") as fh:
            json.dump(summary_dict, fh, indent=2, allow_nan=False)
            fh.write("\n")
        _write_csv(tmp / "flows.csv", *flows)
        _write_csv(tmp / "links.csv", *links)
        if series is not None:
            _write_csv(tmp / "link_series.csv", *series)
        if not out.exists():
            os.rename(tmp, out)
            return out
        if not out.is_dir():
            from topo.errors import InputError

            raise InputError(f"--out {str(out)!r}: exists and is not a directory")
        for name in OUTPUT_FILES:  # replace nothing unless every file can be replaced
            if (out / name).is_dir():
                raise IsADirectoryError(21, "Is a directory", str(out / name))
        for name in OUTPUT_FILES:  # stale file from an earlier run with other options
            if not (tmp / name).exists() and (out / name).exists():
                (out / name).unlink()
        for name in OUTPUT_FILES:
            if (tmp / name).exists():
                os.replace(tmp / name, out / name)
        return out
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def safe_dir_name(name: str) -> str:
    """A scenario name as one path component (for the default ``out/<name>``)."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return s or "scenario"


MAX_DIR_NAME = 200  # bytes of a default directory name (file systems take 255)


def command_out_dir(given, name: str, suffix: str = "") -> Path:
    """``--out`` when given, else ``out/<name><suffix>`` (the commands' default); a name too
    long for a directory is refused naming ``name`` (give --out)."""
    if given:
        return Path(given)
    d = safe_dir_name(name) + suffix
    if len(d.encode()) > MAX_DIR_NAME:
        from netcosim.units import short_repr
        from topo.errors import InputError

        raise InputError(f"name = {short_repr(name, 40)} ({len(name)} characters): too long "
                         f"for the default output directory out/<name> (at most "
                         f"{MAX_DIR_NAME} bytes); shorten it or give --out DIR")
    return Path("out") / d


def out_label(given, out) -> str:
    """How a command's messages name its output directory."""
    return f"--out {str(given)!r}" if given else f"output directory {str(out)!r}"


def table_name(data: dict, path) -> str:
    """The ``name`` of a scenario table, or its file's stem when it has none."""
    name = data.get("name")
    return name if isinstance(name, str) else Path(path).stem
