"""Refuse a scenario whose schedule cannot fit in memory, before allocating it.

A transfer-by-transfer schedule costs about ``BYTES_PER_TRANSFER`` from the moment it is built
until its results are written (schedule arrays, dependency CSR, the flow engine's node and path
state, the CSV text); measured on this project's machines: a 1 GiB ring all-reduce over the
2,048 hosts of fat_tree k=16 (2.1 M transfers) peaks at 1.8 GB, a GPT-3 175B step on 4,096
GPUs (4.9 M transfers) at 3.5 GB: 700-900 bytes each. The estimate rounds up, so a refusal is
never a scenario that would have run; what to change comes with it (docs/scale.md).
"""
from __future__ import annotations

import os

from topo.errors import InputError

BYTES_PER_TRANSFER = 1000
BASE_BYTES = 400 << 20  # interpreter, compiled kernels, topology and routing tables
# the share of the machine's available memory a run may plan to use
SHARE = 0.85


def available_bytes() -> int:
    """Memory the run may use: MemAvailable (Linux), else physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: never refuse on a guess


def estimate_bytes(n_transfers: int) -> int:
    return BASE_BYTES + int(n_transfers) * BYTES_PER_TRANSFER


def check_transfers(n_transfers: int, where: str, what: str, hint: str,
                    delays: int = 0) -> None:
    """InputError (exit 2 from the CLI) when ``n_transfers`` point-to-point transfers (and
    ``delays`` delay nodes, e.g. a step latency before each transfer) cannot fit; the message
    gives the estimate, the memory there is, and ``hint``."""
    need = estimate_bytes(n_transfers + delays)
    have = available_bytes()
    if need > SHARE * have:
        extra = f" and {delays:,} delay nodes" if delays else ""
        raise InputError(f"{where}: {what} is {n_transfers:,} transfers{extra}, about "
                         f"{_gb(need)} of memory, but {_gb(have)} is available; {hint}")


def _gb(b: float) -> str:
    if b >= 1 << 40:
        return f"{b / (1 << 40):,.1f} TiB"
    return f"{b / (1 << 30):,.1f} GiB"


def collective_transfers(op: str, algorithm: str, n: int, chunks: int = 1) -> int:
    """Transfers of a collective's full schedule (upper bounds where the count depends on the
    shape, e.g. a hierarchical algorithm's group size)."""
    import math

    n = int(n)
    if n < 2:
        return 0
    from collectives.protocols import MAX_CHUNKS

    if algorithm in ("nvls", "sharp", "nvls_tree"):
        # per chunk: n up, n down, and per switch of the tree (< 2n) one reduction and one
        # transfer each way; nvls_tree adds a shard each way per rank and the rails' trees
        # (< 4n); chunks default to at most MAX_CHUNKS (collectives/protocols.py)
        per = 6 * n if algorithm != "nvls_tree" else 12 * n
        return per * (MAX_CHUNKS if chunks is None else max(1, int(chunks)))
    c = 1 if chunks is None else max(1, int(chunks))
    per_chunk = {
        ("all_reduce", "ring"): 2 * (n - 1) * n,
        ("all_reduce", "bidirectional_ring"): 4 * (n - 1) * n,
        ("all_reduce", "double_binary_tree"): 4 * (n - 1),
        ("all_reduce", "recursive_halving_doubling"): 2 * n * max(1, math.ceil(math.log2(n))) + 2 * n,
        ("reduce_scatter", "ring"): (n - 1) * n,
        ("all_gather", "ring"): (n - 1) * n,
        ("broadcast", "ring"): n - 1, ("broadcast", "tree"): n - 1,
        ("reduce", "ring"): n - 1, ("reduce", "tree"): n - 1,
        ("send_recv", "direct"): 1,
    }.get((op, algorithm), 2 * n * (n - 1))  # direct, all-to-all, hierarchical, torus: <= 2n^2
    return per_chunk * c
