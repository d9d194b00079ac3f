"""A Perfetto / Chrome trace of a serving run's batches (``netcosim run --trace``).

One process per replica; thread 0 holds one slice per iteration (named by what it ran:
prefill, decode or mixed; args: prefill tokens, decode steps, requests in the batch, KV
tokens reserved, communication seconds), thread 1 the communication part of each iteration
(drawn at its end: compute and communication are not overlapped). A counter track follows the
batch size. At most ``max_events`` iterations (the earliest) are written; the trace says so.
"""
from __future__ import annotations

import json

import numpy as np

from netcosim.inference.loop import (IT_COMM, IT_DECODE, IT_DUR, IT_KV, IT_PREFILL, IT_SEQS,
                                     IT_START)


def batch_trace(iterations: list, path=None, max_events: int = 500_000) -> dict:
    ev = []
    per = max(1, max_events // max(1, len(iterations)))
    total = sum(len(x) for x in iterations)
    for r, its in enumerate(iterations):
        its = its[:per]
        pf, dec = its[:, IT_PREFILL], its[:, IT_DECODE]
        names = np.where(pf > 0, np.where(dec > 0, "mixed", "prefill"), "decode")
        ts = its[:, IT_START] * 1e6
        dur = its[:, IT_DUR] * 1e6
        comm = its[:, IT_COMM] * 1e6
        for k in range(len(its)):
            ev.append({"name": str(names[k]), "ph": "X", "pid": r, "tid": 0, "ts": float(ts[k]),
                       "dur": float(dur[k]),
                       "args": {"prefill_tokens": int(pf[k]), "decode": int(dec[k]),
                                "seqs": int(its[k, IT_SEQS]), "kv_tokens": int(its[k, IT_KV]),
                                "comm_us": float(comm[k])}})
            if comm[k] > 0:
                ev.append({"name": "comm", "ph": "X", "pid": r, "tid": 1,
                           "ts": float(ts[k] + dur[k] - comm[k]), "dur": float(comm[k])})
            ev.append({"name": "batch", "ph": "C", "pid": r, "ts": float(ts[k]),
                       "args": {"seqs": int(its[k, IT_SEQS])}})
        ev.append({"name": "process_name", "ph": "M", "pid": r,
                   "args": {"name": f"replica {r}"}})
        ev.append({"name": "thread_name", "ph": "M", "pid": r, "tid": 0,
                   "args": {"name": "batches"}})
        ev.append({"name": "thread_name", "ph": "M", "pid": r, "tid": 1,
                   "args": {"name": "communication"}})
    trace = {"traceEvents": ev, "displayTimeUnit": "ms", "otherData": {"iterations": total}}
    # each replica's own count, up to its share (min(total, per x replicas) counted the share
    # of a replica with fewer iterations than that: 1000 for the 510 a 10 + 1000 run wrote)
    written = sum(min(len(x), per) for x in iterations)
    if written < total:
        trace["otherData"]["truncated_to_iterations"] = written
    if path is not None:
        with open(path, "w") as f:
            json.dump(trace, f)
    return trace
