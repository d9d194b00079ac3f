"""The sweep's output: a journal of finished rows and the tidy table made from it.

``rows.jsonl`` gets one line per finished point, flushed as it arrives, so an interrupted sweep
loses nothing that finished and ``--resume`` knows what to skip. ``sweep.csv`` (and
``sweep.parquet`` when pyarrow is importable) are rewritten from the journal at the end (and on
Ctrl-C): one row per point of the current sweep, in point order, with the swept parameters,
the results, ``status``/``error`` and the point's full scenario as JSON.
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


class Journal:
    def __init__(self, out_dir, resume: bool):
        self.dir = Path(out_dir)
        self.path = self.dir / JOURNAL
        self.done: dict[str, dict] = {}  # point_id -> row
        if resume:
            self.done = read_journal(self.path)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "a" if resume else "w", encoding="utf-8")
        if resume and self._fh.tell() > 0 and not _ends_with_newline(self.path):
            self._fh.write("\n")  # a line cut short by a crash must not swallow the next row

    def add(self, rows) -> None:
        for row in rows:
            self.done[row["point_id"]] = row
            self._fh.write(json.dumps(_plain(row), allow_nan=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def read_journal(path) -> dict[str, dict]:
    """Finished rows by point id; a last line cut short by a crash is ignored."""
    out = {}
    p = Path(path)
    if not p.exists():
        return out
    with open(p, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue
            if isinstance(row, dict) and isinstance(row.get("point_id"), str):
                out[row["point_id"]] = row
    return out


def build_rows(points, done: dict, extra_columns=()) -> list[dict]:
    """Table rows for the points that have finished, in point order, with the current
    sweep's index and parameters (a resumed row may come from a differently ordered file)."""
    rows = []
    for p in points:
        r = done.get(p.id)
        if r is None:
            continue
        row = {"point": p.index, "point_id": p.id}
        row.update(p.params)
        row.update({k: v for k, v in r.items() if k not in ("point", "point_id")
                    and k not in p.params})
        rows.append(row)
    return rows


def columns_of(rows, params=()) -> list[str]:
    cols = list(LEAD) + [c for c in params if c not in LEAD]
    rest = []
    for r in rows:
        for k in r:
            if k not in cols and k not in rest and k not in TAIL:
                rest.append(k)
    return cols + rest + list(TAIL)


def write_table(out_dir, rows: list[dict], params=()) -> list[Path]:
    """Write sweep.csv (and sweep.parquet when pyarrow is importable); returns the paths."""
    out = Path(out_dir)
    cols = columns_of(rows, params)
    paths = [out / CSV_NAME]
    tmp = out / (CSV_NAME + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(cols)
        for r in rows:
            w.writerow([_cell(r.get(c)) for c in cols])
    os.replace(tmp, out / CSV_NAME)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return paths
    paths.append(_write_parquet(out / PARQUET_NAME, rows, cols))
    return paths


def _write_parquet(path: Path, rows, cols) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {}
    for c in cols:
        vals = [_plain(r.get(c)) for r in rows]
        try:
            arrays[c] = pa.array(vals)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types: keep the text
            arrays[c] = pa.array([None if v is None else _cell(v) for v in vals],
                                 type=pa.string())
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(pa.table(arrays), tmp)
    os.replace(tmp, path)
    return path


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
def read_table(path) -> tuple[list[str], list[dict]]:
    """(columns, rows) of a sweep/faults CSV, numbers parsed back (int, float), empty -> None."""
    with open(path, newline="", encoding="utf-8") as fh:
        r = csv.reader(fh)
        try:
            cols = next(r)
        except StopIteration:
            return [], []
        rows = [{c: _parse(v) for c, v in zip(cols, line)} for line in r]
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
