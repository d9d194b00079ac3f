"""The sweep's output: a journal of finished rows and the tidy table made from it.

``rows.jsonl`` gets one line per finished point, flushed as it arrives, so an interrupted sweep
loses nothing that finished and ``--resume`` knows what to skip. ``sweep.csv`` (and
``sweep.parquet`` when pyarrow is importable) are rewritten from the journal at the end (and on
Ctrl-C): one row per point of the current sweep, in point order, with the swept parameters,
the results, ``status``/``error`` and the point's full scenario as JSON.

Nothing here holds the whole table: the journal is indexed by point id -> byte offset, rows
are read back one at a time in point order, and the table is written in two passes over them
(columns and their types first, then the CSV lines and the Parquet row groups), so a
million-row sweep costs its index, not its rows.
"""
from __future__ import annotations

import csv
import json
import math
import os
import re
from pathlib import Path

JOURNAL = "rows.jsonl"
CSV_NAME = "sweep.csv"
PARQUET_NAME = "sweep.parquet"
LEAD = ("point", "point_id", "status")
TAIL = ("error", "run_s", "cpu_s", "scenario")
PARQUET_GROUP = 65_536  # rows per Parquet row group (what is held at once while writing)
# ... or fewer: a row group is written once its rows' text reaches this many bytes. Rows of a
# large scenario carry it whole in their `scenario` cell (1.4 MB for 20,000 flows), and 65,536
# of them were held at once: 200 such rows took 1 GB to write.
PARQUET_GROUP_BYTES = 32 << 20


class Journal:
    """Appends rows to ``rows.jsonl``; ``index`` maps each finished point id to the offset of
    its (last) line."""

    def __init__(self, out_dir, resume: bool):
        self.dir = Path(out_dir)
        self.path = self.dir / JOURNAL
        self.index: dict[str, int] = index_journal(self.path) if resume else {}
        self.dir.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab" if resume else "wb")
        if resume and self._fh.tell() > 0 and not _ends_with_newline(self.path):
            self._fh.write(b"\n")  # a line cut short by a crash must not swallow the next row

    def add(self, rows) -> None:
        for row in rows:
            self.index[row["point_id"]] = self._fh.tell()
            self._fh.write(json.dumps(_plain(row), allow_nan=False).encode() + b"\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def _lines(path):
    """(offset, row) of every line of a journal that holds a row; a last line cut short by a
    crash, or any line that is not a row, is passed over."""
    p = Path(path)
    if not p.exists():
        return
    with open(p, "rb") as fh:
        off = 0
        for line in fh:
            try:
                row = json.loads(line.decode("utf-8", errors="replace"))
            except (json.JSONDecodeError, RecursionError):
                row = None
            if isinstance(row, dict) and isinstance(row.get("point_id"), str):
                yield off, row
            off += len(line)


def index_journal(path) -> dict[str, int]:
    """Finished points by id -> offset of their row's line (the last one of an id wins)."""
    return {row["point_id"]: off for off, row in _lines(path)}


def settled_points(path) -> set[str]:
    """Ids whose last row is not an error: what ``--resume`` skips. A point that failed (a
    worker out of memory beside others, a killed process) is run again; infeasible and
    stranded points are results, and stay."""
    last = {row["point_id"]: row.get("status") for _, row in _lines(path)}
    return {pid for pid, status in last.items() if status != "error"}


def read_journal(path) -> dict[str, dict]:
    """Finished rows by point id; a last line cut short by a crash is ignored."""
    return {row["point_id"]: row for _, row in _lines(path)}


class JournalRows:
    """The table's rows, made in point order from ``points`` and the journal's ``index``,
    read back one at a time; every pass re-reads (see ``write_table``). ``tally`` counts the
    last full pass's rows by status."""

    def __init__(self, points, path, index: dict[str, int]):
        self.points, self.path, self.index = points, Path(path), index
        self.tally: dict[str, int] = {}

    def __iter__(self):
        tally: dict[str, int] = {}
        with open(self.path, "rb") as fh:
            for p in self.points:
                off = self.index.get(p.id)
                if off is None:
                    continue
                fh.seek(off)
                row = _table_row(p, json.loads(fh.readline()))
                tally[row.get("status")] = tally.get(row.get("status"), 0) + 1
                yield row
        self.tally = tally


def _table_row(p, r: dict) -> dict:
    """A journal row as the current sweep's table row: its index and parameters (a resumed row
    may come from a differently ordered file)."""
    row = {"point": p.index, "point_id": p.id}
    row.update(p.params)
    row.update({k: v for k, v in r.items() if k not in ("point", "point_id")
                and k not in p.params})
    return row


def build_rows(points, done: dict, extra_columns=()) -> list[dict]:
    """Table rows for the points that have finished, in point order (``done``: id -> row)."""
    return [_table_row(p, done[p.id]) for p in points if p.id in done]


def columns_of(rows, params=()) -> list[str]:
    cols = list(LEAD) + [c for c in params if c not in LEAD]
    rest = []
    for r in rows:
        for k in r:
            if k not in cols and k not in rest and k not in TAIL:
                rest.append(k)
    return cols + rest + list(TAIL)


def write_table(out_dir, rows, params=()) -> list[Path]:
    """Write sweep.csv (and sweep.parquet when pyarrow is importable); returns the paths.
    ``rows``: a list, or anything that gives the rows afresh on each pass (JournalRows)."""
    out = Path(out_dir)
    try:
        import pyarrow  # noqa: F401
        parquet = True
    except ImportError:
        parquet = False
    # pass 1: the columns, and for Parquet each column's type
    cols, rest, kinds = list(LEAD) + [c for c in params if c not in LEAD], [], {}
    for r in rows:
        for k, v in r.items():
            if k not in cols and k not in rest and k not in TAIL:
                rest.append(k)
            if parquet:
                _note_kind(kinds, k, v)
    cols = cols + rest + list(TAIL)
    # pass 2: the CSV lines, and the Parquet row groups
    paths = [out / CSV_NAME]
    tmp = out / (CSV_NAME + ".tmp")
    writer = _ParquetWriter(out / PARQUET_NAME, cols, kinds) if parquet else None
    try:
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(cols)
            for r in rows:
                w.writerow([_cell(r.get(c)) for c in cols])
                if writer is not None:
                    writer.add(r)
        if writer is not None:
            paths.append(writer.close())
    finally:
        if writer is not None:
            writer.abort()
    os.replace(tmp, out / CSV_NAME)
    return paths


# =========================================================================== Parquet
def _note_kind(kinds: dict, col: str, v) -> None:
    """What a column holds, as the types Parquet needs: the Python types seen and the range
    of its integers (beyond int64 it is text)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        kinds.setdefault(col, [set(), 0, 0])
        return
    k = kinds.setdefault(col, [set(), 0, 0])
    t = type(v)
    k[0].add(t)
    if t is int:
        k[1], k[2] = min(k[1], v), max(k[2], v)


def _arrow_type(kind):
    """The column type pyarrow would infer from all its values at once: bool, int64, float64
    (ints and floats together), string; nothing but nulls: null; anything else (mixed types,
    tables, lists, ints beyond int64): the CSV cell's text."""
    import pyarrow as pa

    types, lo, hi = kind
    if not types:
        return pa.null()
    if types == {bool}:
        return pa.bool_()
    if types <= {int, float} and -2**63 <= lo and hi < 2**63:
        return pa.int64() if types == {int} else pa.float64()
    if types == {str}:
        return pa.string()
    return None  # text


class _ParquetWriter:
    """sweep.parquet in row groups of PARQUET_GROUP rows, written to a temporary file and
    renamed into place by ``close``."""

    def __init__(self, path: Path, cols, kinds: dict):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path, self.cols = path, cols
        self.types = [_arrow_type(kinds.get(c, [set(), 0, 0])) for c in cols]
        self.schema = pa.schema([(c, t if t is not None else pa.string())
                                 for c, t in zip(cols, self.types)])
        self.tmp = path.with_suffix(".parquet.tmp")
        self._w = pq.ParquetWriter(self.tmp, self.schema)
        self._rows: list = []
        self._bytes = 0  # text held in self._rows

    def add(self, row: dict) -> None:
        self._rows.append(row)
        self._bytes += sum(len(v) for v in row.values() if isinstance(v, str))
        if len(self._rows) >= PARQUET_GROUP or self._bytes >= PARQUET_GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if not self._rows:
            return
        arrays = []
        for c, t, f in zip(self.cols, self.types, self.schema):
            vals = [_plain(r.get(c)) for r in self._rows]
            if t is None:
                vals = [None if v is None else _cell(v) for v in vals]
            arrays.append(pa.array(vals, type=f.type))
        self._w.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self._rows, self._bytes = [], 0

    def close(self) -> Path:
        self._flush()
        self._w.close()
        self._w = None
        os.replace(self.tmp, self.path)
        return self.path

    def abort(self) -> None:
        if self._w is not None:
            self._w.close()
            self._w = None
        if self.tmp.exists():
            self.tmp.unlink()


def _plain(v):
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v)


# =========================================================================== reading
# columns netcosim writes as text whatever they look like: a point id is 16 hex digits, and
# one in about 800 reads as a number ("2572518598123321" an int, "61542395e3329141" inf)
TEXT_COLUMNS = ("point_id", "status", "error", "scenario")
# the csv module refuses a field beyond 128 KiB by default, and a row's scenario cell is the
# whole scenario (4,000 explicit flows: 140 KB): `netcosim plot` refused such a sweep's table
CSV_FIELD_LIMIT = 2**31 - 1


def read_table(path) -> tuple[list[str], list[dict]]:
    """(columns, rows) of a sweep/faults CSV, numbers parsed back (int, float), empty -> None."""
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, CSV_FIELD_LIMIT))
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            r = csv.reader(fh)
            try:
                cols = next(r)
            except StopIteration:
                return [], []
            text = [c in TEXT_COLUMNS for c in cols]
            rows = [{c: (v or None) if t else _parse(v) for c, t, v in zip(cols, text, line)}
                    for line in r]
    finally:
        csv.field_size_limit(limit)  # the module's limit is global: others' readers keep theirs
    return cols, rows


_NUM = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")


def _parse(s: str):
    if s == "":
        return None
    if s in ("true", "false"):
        return s == "true"
    if not _NUM.match(s):  # labels such as "nan" or "inf" stay text
        return s
    try:
        return int(s)
    except ValueError:
        return float(s)
