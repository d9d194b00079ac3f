"""What an engine returns: per-node times, per-directed-link counters, run facts."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)
class Result:
    engine: str
    start: np.ndarray  # float64 (n,) seconds; NaN if the node never started
    end: np.ndarray  # float64 (n,) seconds; NaN if it never finished (stranded or blocked)
    stranded: np.ndarray  # bool (n,) a transfer with no surviving path (or blocked behind one)
    link_bytes: np.ndarray  # float64 (n_dlinks,) bytes carried per directed link
    link_busy: np.ndarray  # float64 (n_dlinks,) seconds the link was carrying traffic
    events: int = 0  # events processed by the engine
    wall_s: float = 0.0  # engine time without start-up (compilation, imports, set-up)
    # engine-specific per-link counters (queue_max_bytes, drops, ecn_marks, pause_s, ...)
    link_extra: dict = field(default_factory=dict)
    # engine-specific per-node arrays (retransmissions, paths: path_ptr/path_links, ...)
    node_extra: dict = field(default_factory=dict)
    # anything else worth reporting in summary.json (compile_s, events_per_s, ...)
    info: dict = field(default_factory=dict)
    # seconds the link figures are closed at when that is not the makespan: a session's look
    # before the end (its clock), where busy time runs up to now and not to the last transfer
    # done by then (which made utilization 38.5 on a look at 85 us)
    span: float | None = None

    @property
    def finished(self) -> np.ndarray:
        return np.isfinite(self.end)

    @property
    def makespan(self) -> float:
        """Time the last finished node ended (seconds); 0 for an empty run."""
        fin = self.end[np.isfinite(self.end)]
        return float(fin.max()) if fin.size else 0.0

    @property
    def n_stranded(self) -> int:
        return int(np.count_nonzero(self.stranded))

    def link_utilization(self, span: float | None = None) -> np.ndarray:
        """Busy time over ``span``, else over the span the figures are closed at (``span``
        attribute, a look's clock), else over the makespan, per directed link."""
        if span is None:
            span = self.makespan if self.span is None else self.span
        if span <= 0:
            return np.zeros_like(self.link_busy)
        return self.link_busy / span


def fold_onto(res: Result, owner: np.ndarray, n: int) -> Result:
    """A result over pieces folded onto ``n`` nodes, piece i belonging to node ``owner[i]``
    (schedules split by faults or planes, netcore/flow/fault_split.py and
    netcore/packet/plane_split.py): a node started with its earliest piece and ended with its
    latest (unfinished if any piece is); per-node flags are any piece's, counts summed."""
    owner = np.asarray(owner, dtype=np.int64)
    start = np.full(n, np.inf)
    np.fmin.at(start, owner, np.where(np.isnan(res.start), np.inf, res.start))
    end = np.full(n, -np.inf)
    np.maximum.at(end, owner, np.where(np.isnan(res.end), np.inf, res.end))
    start[np.isinf(start)] = np.nan
    end[np.isinf(end)] = np.nan
    stranded = np.zeros(n, dtype=bool)
    np.logical_or.at(stranded, owner, np.asarray(res.stranded, dtype=bool))
    res.start, res.end, res.stranded = start, end, stranded
    for key, v in list(res.node_extra.items()):
        v = np.asarray(v)
        if v.ndim == 1 and len(v) == len(owner):
            w = np.zeros(n, dtype=v.dtype)
            if v.dtype == bool:
                np.logical_or.at(w, owner, v)
            elif np.issubdtype(v.dtype, np.number):
                np.add.at(w, owner, v)
            else:  # anything else: the first piece's (the node's own, where it is listed)
                w = v[np.unique(owner, return_index=True)[1]]
            res.node_extra[key] = w
    return res
