"""1F1B pipeline orders (Megatron-LM's non-interleaved and interleaved schedules).

``order(p, m, v, stage)`` lists the units a pipeline rank runs, in stream order, as arrays
(phase 0 = forward / 1 = backward, model chunk, micro-batch). Model chunk c of stage s holds
pipeline position c * p + s: activations flow through positions 0, 1, ..., p*v - 1.
"""
from __future__ import annotations

import numpy as np

FWD, BWD = 0, 1


def _chunk_mb(k: np.ndarray, p: int, v: int, backward: bool):
    # virtual micro-batch k: groups of p micro-batches sweep the v chunks in turn
    in_group = k % (p * v)
    chunk = in_group // p
    if backward:
        chunk = v - 1 - chunk
    mb = (k // (p * v)) * p + k % p
    return chunk, mb


def order(p: int, m: int, v: int, stage: int):
    """(phase, chunk, microbatch) int arrays for pipeline rank ``stage`` (one step)."""
    if v == 1:
        warm = min(p - stage - 1, m)
        f_mb = np.arange(m)
        b_mb = np.arange(m)
        seq = [(FWD, 0, int(j)) for j in f_mb[:warm]]
        for i in range(m - warm):
            seq.append((FWD, 0, warm + i))
            seq.append((BWD, 0, i))
        seq += [(BWD, 0, int(j)) for j in b_mb[m - warm:]]
    else:
        total = m * v
        warm = min((p - stage - 1) * 2 + (v - 1) * p, total)
        k = np.arange(total)
        fc, fm = _chunk_mb(k, p, v, False)
        bc, bm = _chunk_mb(k, p, v, True)
        seq = [(FWD, int(fc[i]), int(fm[i])) for i in range(warm)]
        for i in range(total - warm):
            seq.append((FWD, int(fc[warm + i]), int(fm[warm + i])))
            seq.append((BWD, int(bc[i]), int(bm[i])))
        seq += [(BWD, int(bc[i]), int(bm[i])) for i in range(total - warm, total)]
    a = np.asarray(seq, dtype=np.int64).reshape(-1, 3)
    return a[:, 0], a[:, 1], a[:, 2]
