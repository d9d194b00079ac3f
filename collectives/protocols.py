"""NCCL's three protocols (LL, LL128, Simple), their costs, and the default pipeline chunks.

A protocol changes three things in a collective's schedule (docs/collectives.md, "Protocols"):

* **wire bytes**: LL writes 8-byte lines of 4 data bytes and a 4-byte flag (half the bytes on
  the wire are flags); LL128 writes 128-byte lines of 120 data bytes and an 8-byte flag;
  Simple writes the data and a separate flag per step. A transfer of S payload bytes puts
  ``wire_bytes(S)`` = ceil(S * den / num) bytes on the links, so both engines see the extra
  load without knowing about protocols.
* **per-step latency**: the software cost of a step (flag polling, the network proxy), a
  DELAY on the data path before every transfer (collectives/_plan.py): NCCL's per-hop latency
  of the algorithm's family (FAMILY_LATENCY), one figure inside an NVLink domain and one
  across the network.
* **launch latency**: NCCL's base latency, once per collective and rank.

Figures are NCCL's tuner constants (src/graph/tuning.cc, ``ncclTunerConstantsDefaults``:
``baseLatencies`` and ``hwLatencies`` for NVLINK and NET) and its buffer
layout (src/include/device.h: NCCL_STEPS = 8, 16-byte LL lines of 8 data bytes, 128-byte
LL128 lines of 15 data words; src/init.cc: DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE, 4 MiB
Simple buffer; src/enqueue.cc: chunk = step size x chunk steps, halved for LL, 15/16 for
LL128), https://github.com/NVIDIA/nccl.

**LL throughput cap.** LL's GPU threads store and poll every 8-byte line themselves, so NCCL's
tuner caps LL's bus bandwidth whatever the links (src/graph/tuning.cc, ``llMaxBws``): by the
GPU inside one node, by the host CPU across nodes (LL_MAX_GBPS), over all the collective's
channels together. An LL transfer of ours therefore lasts at least its payload / its share of
the cap (``Costs.rate_cap``): a ring rank sends its steps one after another, so its rate, which
is a ring's bus bandwidth, stays under the cap as in NCCL's tuner; where a rank sends on
several rings, chains or trees side by side (one per rail on whole two_tier nodes) or to
every peer at once (the direct algorithms), each of those sends gets its share
(``channels``), so that the rank's sends together stay under it. LL128's caps
(perChMaxRingLL128Bws, perChMaxTreeLL128Bws: 29-36.7 GB/s per channel, times 16 or more
channels) lie above what 8 x 400 Gb/s NICs or an NVLink 4 port carry, so they are not
modelled.

**Chunks.** NCCL cuts each channel's data into chunks (per channel: Simple 512 KiB per step,
LL 32 KiB, LL128 576,000 bytes) and runs ``CHANNELS`` channels side by side. A transfer of our
schedules carries every channel's share, so one of our chunks is CHANNELS x NCCL's chunk: the
pipeline has as many stages in flight as NCCL's. NVLS and NVLS-Tree pipeline at NCCL's loop
step, CHANNELS x heads x a chunk NCCL picks by size (nvls_chunk_per_op), and every step costs
the switch NVLS_STEP_S beyond its bytes (nvls_step_s_per_byte). Pipelined algorithms
(trees, chains, the in-network ones) default to that count, at most
``MAX_CHUNKS`` and at most what keeps the full schedule under ``MAX_DEFAULT_TRANSFERS``
transfers (a deterministic bound: results never depend on the machine's memory). That bound
holds a schedule's memory, so the alpha-beta estimate, which builds none, prices NCCL's count
without it (``chunks_for(..., bounded=False)``): past about 1,000 GPUs the bounded schedules
pay a fill NCCL does not (docs/collectives.md, "The bound on a schedule's transfers"). Rings and
all-pairs algorithms default to one chunk: a ring already pipelines its n shards, and NCCL's
tuner charges its latency per step, not per chunk (extra chunks would only add steps).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from netcore.sizes import MAX_BYTES  # Schedule.size is int64
from topo.errors import InputError


@dataclass(frozen=True)
class Protocol:
    name: str
    num: int  # payload bytes per ``den`` wire bytes
    den: int
    launch_s: float  # NCCL base latency (ring row), once per collective
    nvlink_step_s: float  # per step inside a scale-up (NVLink) domain (ring row)
    net_step_s: float  # per step across the network (ring row)
    chunk_bytes: int  # NCCL's chunk per channel (trees, chains)

    @property
    def efficiency(self) -> float:
        """Payload bytes per wire byte."""
        return self.num / self.den

    def wire_bytes(self, payload):
        """Bytes on the links for ``payload`` bytes (int or int array), rounded up."""
        out = wire_of(payload, self.num, self.den, self.name)
        return int(out) if out.ndim == 0 else out


def wire_of(payload, num: int, den: int, protocol: str | None = None) -> np.ndarray:
    """ceil(payload x den / num) in int64, exactly: as q x den + ceil(r x den / num) with
    payload = q x num + r, so no intermediate exceeds the result (``payload * den`` wrapped
    past 2^63 / den: a 2^61-byte LL128 send became 0 bytes on the wire). A result beyond int64
    is an InputError naming the bytes."""
    p = np.asarray(payload, dtype=np.int64)
    num, den = int(num), int(den)
    if p.size and den > num:
        limit = (MAX_BYTES * num) // den  # the largest payload whose wire bytes fit
        hi, lo = int(p.max()), int(p.min())
        if max(hi, -lo) > limit:
            x = hi if hi >= -lo else lo
            raise InputError(f"bytes: {x:,} payload bytes are {-(-x * den // num):,} bytes on "
                             f"the wire with protocol {protocol or '?'} ({den} wire bytes per "
                             f"{num}), beyond the {MAX_BYTES:,} an int64 holds")
    q, r = np.divmod(p, num)
    return q * den + (r * den + num - 1) // num


# NCCL_STEPS = 8; LL buffer = 8 lines/thread x 512 threads x 8 steps x 16 B = 512 KiB -> 64 KiB a
# step, half of it data; LL128 buffer = 120 x 640 x 8 x 8 B = 4,915,200 B -> 614,400 B a step,
# 15/16 data; Simple buffer 4 MiB -> 512 KiB a step.
PROTOCOLS: dict[str, Protocol] = {
    "ll": Protocol("ll", 1, 2, 6.6e-6, 0.6e-6, 2.7e-6, 32 << 10),
    "ll128": Protocol("ll128", 15, 16, 14.0e-6, 1.9e-6, 4.0e-6, 576_000),
    "simple": Protocol("simple", 1, 1, 8.4e-6, 3.4e-6, 14.0e-6, 512 << 10),
}
NAMES = tuple(PROTOCOLS)

# NCCL's latencies per algorithm family (src/graph/tuning.cc, hwLat and baseLat), in seconds:
# (per step inside an NVLink domain, per step across the network) from hwLat, and the launch
# (baseLat). NCCL charges a ring nsteps hops, a tree two per level; NVLS 25 us and NVLSTree
# 25 us + 14 us per tree level in all, which we spread over their NVLink steps (two for NVLS:
# to the switch and back; four for NVLSTree); CollNet (SHARP) 31 us of network latency, half
# on a rank's step into the aggregation tree and half on the step out. The figures are NCCL
# 2.24-2.27's, the versions nccl_tuner models and every published table we validate on ran
# (the same figures there, so the pick and the price agree; tests/test_nccl_tuner.py holds
# them equal). Newer NCCL changed NVLSTree's bandwidth rule (2.28) and raised its network
# step to 20.9 us (2.28.9, November 2025); neither module represents those versions.
FAMILY_LATENCY = {
    "ring": {"ll": (0.6e-6, 2.7e-6, 6.6e-6), "ll128": (1.9e-6, 4.0e-6, 14.0e-6),
             "simple": (3.4e-6, 14.0e-6, 8.4e-6)},
    "tree": {"ll": (0.6e-6, 5.0e-6, 6.8e-6), "ll128": (1.25e-6, 8.5e-6, 14.0e-6),
             "simple": (4.0e-6, 14.0e-6, 8.4e-6)},
    "nvls": {"simple": (25.0e-6 / 2, 18.0e-6, 0.0)},
    "nvls_tree": {"simple": (25.0e-6 / 4, 14.0e-6, 0.0)},
    "collnet": {"simple": (3.7e-6, 31.0e-6 / 2, 0.0)},
}


def family(algorithm: str) -> str:
    """NCCL's algorithm whose latencies an algorithm of ours takes."""
    if algorithm in ("double_binary_tree", "tree"):
        return "tree"
    if algorithm in ("nvls", "nvls_tree"):
        return algorithm
    if algorithm == "sharp":
        return "collnet"
    return "ring"  # rings, chains, all pairs, halving-doubling, ring compositions
AUTO = "auto"
# NCCL's LL bus-bandwidth caps in GB/s (src/graph/tuning.cc, llMaxBws): (one node, two
# nodes, more nodes), for Hopper GPUs (one node: 141) and Intel hosts (across nodes: 39 on
# two, 20.4 on more). NCCL's other rows: one node Volta 39, Ampere 87.7, Blackwell 282; AMD
# hosts 22.5 on two nodes and 19.0 on more. A "node" is a scale-up domain of two_tier and a
# host elsewhere.
LL_MAX_GBPS = (141.0, 39.0, 20.4)
# NVLS on Hopper: 16 channels (NVLS_NCHANNELS_SM90) of 128 KiB chunks (NCCL_NVLS_CHUNKSIZE);
# NVLS-Tree caps the chunk at 64 KiB from 4 nodes on (nvlsTreeMaxChunkSize), src/transport/nvls.cc
CHANNELS = 16
NVLS_CHUNK_BYTES = 128 << 10
NVLS_TREE_CHUNK_BYTES_4N = 64 << 10
# NVLS step cost: a switch reduction of one loop step (CHANNELS x heads x chunk bytes) takes
# bytes / reduce rate plus this, whatever the chunk: NCCL's smaller chunks for mid sizes
# (nvls_chunk_per_op) therefore run below the plateau. Calibrated on the 1-node H100 table
# (validation/nccl_tests.py says which points), not on any multi-node one.
NVLS_STEP_S = 5.0e-6
MAX_CHUNKS = 256
MAX_DEFAULT_TRANSFERS = 1 << 21

# algorithms whose chunks pipeline through stages (trees, chains, switch trees); the others
# take one chunk unless told otherwise: rings, all pairs and halving-doubling, and the ring
# compositions (hierarchical, torus), whose ranks send every chunk of a phase before the next
# phase (collectives/_ring.py), so chunks would only add steps there
PIPELINED = {
    ("all_reduce", "double_binary_tree"), ("all_reduce", "nvls_tree"),
    ("broadcast", "ring"), ("broadcast", "tree"), ("reduce", "ring"), ("reduce", "tree"),
    *((op, a) for op in ("all_reduce", "reduce_scatter", "all_gather")
      for a in ("nvls", "sharp")),
}
# NCCL runs NVLS and CollNet (SHARP) with Simple only (src/graph/tuning.cc)
SIMPLE_ONLY = {"nvls", "sharp", "nvls_tree"}


def resolve(protocol, field: str = "protocol", allow_auto: bool = True):
    """Canonical protocol name (or "auto"), or None for none; InputError naming ``field``."""
    if protocol is None:
        return None
    if isinstance(protocol, Protocol):
        return protocol.name
    if not isinstance(protocol, str):
        raise InputError(f"{field} = {protocol!r}: expected a protocol name "
                         f"({', '.join(NAMES)}{' or auto' if allow_auto else ''})")
    p = protocol.strip().lower()
    if p == AUTO and allow_auto:
        return AUTO
    if p not in PROTOCOLS:
        raise InputError(f"{field} = {protocol!r}: unknown protocol (expected "
                         f"{', '.join(NAMES)}{' or auto' if allow_auto else ''})")
    return p


def get(protocol) -> Protocol | None:
    p = resolve(protocol, allow_auto=False)
    return None if p is None else PROTOCOLS[p]


def allowed(algorithm: str) -> tuple[str, ...]:
    """Protocols an algorithm runs with (NCCL: NVLS and CollNet only with Simple)."""
    return ("simple",) if algorithm in SIMPLE_ONLY else NAMES


def check_for(algorithm: str, protocol, field: str = "protocol"):
    p = resolve(protocol, field)
    if p not in (None, AUTO) and p not in allowed(algorithm):
        raise InputError(f"{field} = {protocol!r}: {algorithm} runs only with "
                         f"{', '.join(allowed(algorithm))} (NCCL runs NVLS and CollNet with the "
                         f"Simple protocol)")
    return p


# --------------------------------------------------------------------------- chunks
def nvls_chunk_per_op(algorithm: str, nbytes: int, heads: int, n_groups: int = 1) -> int:
    """NCCL's NVLS / NVLS-Tree chunk per channel and head for a collective of ``nbytes``
    (src/enqueue.cc, NVLS and NVLS_TREE branches): one loop step moves CHANNELS x heads of
    them, and NCCL halves the chunk while the buffer is fewer than so many loop steps (NVLS:
    128 KiB from 64 steps, 64 KiB from 8, 32 KiB from 2, else 16 KiB; NVLS-Tree: 128 KiB, or
    64 KiB from 4 domains, then 64 KiB below 4 steps and 32 KiB below one)."""
    ops = CHANNELS * max(1, int(heads))
    S = int(nbytes)
    if algorithm == "nvls":
        c = NVLS_CHUNK_BYTES
        steps = ((64, 65536), (8, 32768), (2, 16384))
    else:
        c = NVLS_TREE_CHUNK_BYTES_4N if n_groups >= 4 else NVLS_CHUNK_BYTES
        steps = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))
    for loops, smaller in steps:
        if S < loops * ops * c and c > smaller:
            c = smaller
    return c


def nvls_step_s_per_byte(costs, nbytes: int, heads: int, n_groups: int = 1) -> float:
    """Seconds per byte an NVLS switch reduction adds to bytes / reduce rate: NVLS_STEP_S per
    NCCL loop step of this size (CHANNELS x heads x nvls_chunk_per_op), so it does not depend
    on how many of our chunks the buffer is cut into. Only with NCCL's own costs in effect (a
    protocol and no user step latency) and for NVLS / NVLS-Tree; else 0."""
    if costs.protocol is None or costs.fixed_step_s is not None or \
            family(costs.algorithm) not in ("nvls", "nvls_tree"):
        return 0.0
    return NVLS_STEP_S / nvls_loop_bytes(costs.algorithm, nbytes, heads, n_groups)


def nvls_loop_bytes(algorithm: str, nbytes: int, heads: int, n_groups: int = 1) -> int:
    """Bytes of one NCCL NVLS / NVLS-Tree loop step: CHANNELS x heads x nvls_chunk_per_op."""
    return CHANNELS * heads * nvls_chunk_per_op(algorithm, nbytes, heads, n_groups)


def chunk_bytes(op: str, algorithm: str, nbytes: int, protocol=None, n_groups: int = 1,
                heads: int = 1) -> int:
    """Our chunk. NVLS and NVLS-Tree: one NCCL loop step for this size (nvls_loop_bytes;
    ``heads``: ranks per NVLink domain), the granularity their stages pipeline at. SHARP:
    CHANNELS x 128 KiB. Others: CHANNELS x the protocol's chunk."""
    if algorithm in ("nvls", "nvls_tree"):
        return nvls_loop_bytes(algorithm, nbytes, heads, n_groups)
    if algorithm == "sharp":
        return CHANNELS * NVLS_CHUNK_BYTES
    proto = get(protocol) or PROTOCOLS["simple"]
    return CHANNELS * proto.chunk_bytes


def default_chunks(op: str, algorithm: str, nbytes: int, parts: int, protocol=None,
                   transfers_per_chunk: int = 0, n_groups: int = 1, heads: int = 1) -> int:
    """Chunks when none are given: one per chunk_bytes for pipelined algorithms, 1 otherwise;
    at most MAX_CHUNKS, at most MAX_DEFAULT_TRANSFERS // transfers_per_chunk, and at most
    nbytes // parts (every block of a chunk keeps a byte)."""
    if (op, algorithm) not in PIPELINED:
        return 1
    c = math.ceil(int(nbytes) / chunk_bytes(op, algorithm, nbytes, protocol, n_groups, heads))
    c = min(c, MAX_CHUNKS)
    if transfers_per_chunk > 0:
        c = min(c, max(1, MAX_DEFAULT_TRANSFERS // transfers_per_chunk))
    return int(max(1, min(c, int(nbytes) // max(1, parts))))


def transfers_per_chunk(op: str, algorithm: str, n: int, group_size=None) -> int:
    """Transfers one chunk of a pipelined algorithm's schedule holds (for the chunk bound)."""
    if algorithm == "double_binary_tree":
        return 4 * (n - 1)
    if algorithm in ("nvls", "sharp"):
        return 6 * n
    if algorithm == "nvls_tree":
        g = int(group_size or n)
        return 6 * n + 4 * (n // g - 1) * g
    return max(1, n - 1)  # chains and binomial trees


def blocks_per_chunk(op: str, algorithm: str, n: int, group_size=None) -> int:
    """Blocks one chunk is cut into by the builder (each must keep a byte)."""
    if algorithm == "double_binary_tree":
        return 2
    if algorithm == "nvls_tree":
        return 2 * int(group_size or n)
    if algorithm in ("nvls", "sharp"):
        return 1 if op == "all_reduce" else n
    if op in ("broadcast", "reduce", "send_recv"):
        return 1
    if algorithm == "bidirectional_ring":
        return 2 * n
    if algorithm == "recursive_halving_doubling":
        return 1 << (int(n).bit_length() - 1)
    return n  # rings, direct, hierarchical, torus, all-to-all pieces


def chunks_for(op: str, algorithm: str, nbytes: int, n: int, protocol=None,
               group_size=None, rings: int = 1, bounded: bool = True) -> int:
    """The default chunk count the builder of ``algorithm`` uses for ``nbytes`` over n ranks.
    ``rings``: rings or chains side by side (one per rail on whole two_tier nodes,
    collectives/rail.py), each cutting every chunk and carrying its own transfers.
    ``bounded`` False: without the MAX_DEFAULT_TRANSFERS bound, which holds a schedule's size
    and so is the builders' alone: NCCL's own count (at most MAX_CHUNKS), what the alpha-beta
    estimate prices."""
    g = int(group_size or n)
    per = rings * transfers_per_chunk(op, algorithm, n, g) if bounded else 0
    return default_chunks(op, algorithm, nbytes, rings * blocks_per_chunk(op, algorithm, n, g),
                          protocol, per, max(1, n // g), g if algorithm == "nvls_tree" else n)


# --------------------------------------------------------------------------- latencies
def intra_mask(topology, src, dst) -> np.ndarray:
    """Whether each step src -> dst stays in a scale-up (NVLink) domain: both ends in one
    node of a two_tier fabric, or a rank and its node's scale-up switch. Every step of the
    other fabrics crosses the network."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if topology is None or getattr(topology, "kind", None) != "two_tier":
        return np.zeros(src.shape, dtype=bool)
    group = _node_domain(topology)
    return (group[src] >= 0) & (group[src] == group[dst])


def _node_domain(topology) -> np.ndarray:
    """Per node, its scale-up domain (two_tier node) or -1: hosts by host_group, each
    scale-up switch by the hosts linked to it."""
    got = topology.__dict__.get("_scaleup_domain")
    if got is not None:
        return got
    t = topology
    dom = np.full(t.n_nodes, -1, dtype=np.int64)
    dom[:t.n_hosts] = np.asarray(t.host_group)[:t.n_hosts]
    names = list(getattr(t, "layer_names", ()) or ())
    if "scaleup" in names:
        lay = names.index("scaleup")
        u, v = t.link_u.astype(np.int64), t.link_v.astype(np.int64)
        m = t.link_layer.astype(np.int64) == lay
        hu, sv = u[m], v[m]
        flip = hu >= t.n_hosts
        hosts = np.where(flip, sv, hu)
        sws = np.where(flip, hu, sv)
        dom[sws] = dom[hosts]
    t.__dict__["_scaleup_domain"] = dom
    return dom


def spanned_nodes(topology, ranks) -> int:
    """How many nodes NCCL would count among ``ranks`` (host ids): scale-up domains on
    two_tier, hosts on every other fabric (and without a topology)."""
    from topo.arrays import unique

    r = np.asarray(ranks, dtype=np.int64).reshape(-1)
    if topology is not None and getattr(topology, "kind", None) == "two_tier":
        r = _node_domain(topology)[r]
    return max(1, len(unique(r)))


def step_latency(protocol, topology, src, dst, algorithm: str = "ring") -> np.ndarray:
    """Per step src -> dst (node ids), the protocol's latency in seconds for ``algorithm``'s
    family (FAMILY_LATENCY): the NVLink figure inside a scale-up domain, else the network's;
    CollNet's steps between two switches add none (the switches' own latency is the links')."""
    p = get(protocol)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if p is None:
        return np.zeros(src.shape)
    fam = family(algorithm)
    nv, net, _ = FAMILY_LATENCY[fam].get(p.name, FAMILY_LATENCY["ring"][p.name])
    out = np.where(intra_mask(topology, src, dst), nv, net)
    if fam == "collnet" and topology is not None:
        nh = topology.n_hosts
        out = np.where((src >= nh) & (dst >= nh), 0.0, out)
    return out


def launch_latency(protocol, algorithm: str = "ring") -> float:
    p = get(protocol)
    if p is None:
        return 0.0
    return FAMILY_LATENCY[family(algorithm)].get(p.name, FAMILY_LATENCY["ring"][p.name])[2]


def channels(algorithm: str, n: int, lanes: int = 1, op: str | None = None) -> int:
    """Sends a rank of ``algorithm`` over n ranks keeps in flight side by side: one per lane
    (``lanes``: rings, chains or trees laid in parallel, one per rail on whole two_tier nodes,
    two for the double binary tree and the bidirectional ring), one per peer for the direct
    algorithms of the collectives (send_recv's ``direct`` sends to one peer: one). LL's cap is
    the rank's, not each send's: NCCL caps the collective's bus bandwidth over all its channels
    (llMaxBws), so each of these sends gets cap / channels."""
    if algorithm == "direct" and op != "send_recv":
        return max(1, int(n) - 1)
    return max(1, int(lanes))


@dataclass(frozen=True)
class Costs:
    """What a schedule builder applies: wire ratio, per-step latency rule, launch latency."""
    protocol: str | None
    num: int = 1
    den: int = 1
    launch_s: float = 0.0
    fixed_step_s: float | None = None  # a user's per-step latency (replaces the protocol's)
    topology: object = None
    algorithm: str = "ring"

    def wire(self, payload):
        if self.num == self.den:
            return payload
        return wire_of(payload, self.num, self.den, self.protocol)

    def latency(self, src, dst) -> np.ndarray:
        src = np.asarray(src, dtype=np.int64)
        if self.fixed_step_s is not None:
            return np.full(src.shape, float(self.fixed_step_s))
        return step_latency(self.protocol, self.topology, src, dst, self.algorithm)

    def mean_latency(self, src, dst):
        """Per row (last axis) of connections src -> dst, the mean of their step latencies:
        what every step of a one-chunk ring over them pays (collectives._ring
        .ring_step_latency), so that a round costs the sum of its steps' own latencies."""
        return np.asarray(self.latency(src, dst), dtype=np.float64).mean(axis=-1)

    def rate_cap(self, ranks, channels: int = 1) -> float:
        """Payload bytes per second an LL transfer among ``ranks`` (host ids) moves at most:
        LL_MAX_GBPS by the nodes they span, shared by the ``channels`` sends a rank keeps in
        flight side by side (``protocols.channels``); 0.0 for other protocols (no cap)."""
        if self.protocol != "ll":
            return 0.0
        nodes = spanned_nodes(self.topology, ranks)
        return LL_MAX_GBPS[min(nodes, 3) - 1] * 1e9 / max(1, int(channels))

    @property
    def any_latency(self) -> bool:
        if self.fixed_step_s is not None:
            return self.fixed_step_s > 0
        return self.protocol is not None


def costs(protocol=None, step_latency_s=None, topology=None, algorithm: str = "ring") -> Costs:
    """The costs a builder applies. ``step_latency_s`` given: that per-step latency instead of
    the protocol's per-step and launch latencies; the protocol still sets the wire bytes."""
    p = get(protocol)
    if p is None:
        return Costs(None, fixed_step_s=0.0 if step_latency_s is None else step_latency_s)
    if step_latency_s is not None:
        return Costs(p.name, p.num, p.den, 0.0, step_latency_s, topology, algorithm)
    return Costs(p.name, p.num, p.den, launch_latency(p.name, algorithm), None, topology,
                 algorithm)


# --------------------------------------------------------------------------- the choice
def best(topology, op: str, algorithm: str, ranks, nbytes, fabric=None, **options):
    """(protocol, seconds): the protocol of least alpha-beta estimate for this collective
    (collectives.analytical.estimate with the protocol's wire bytes, latencies and default
    chunks), as NCCL's tuner picks the protocol of least predicted time (latency + size /
    bandwidth per algorithm and protocol, src/graph/tuning.cc). Ties go to the earlier of
    LL, LL128, Simple."""
    from collectives.analytical import Fabric, estimate

    fab = fabric or Fabric.cached(topology)
    out = None
    for p in allowed(algorithm):
        t = estimate(topology, op, algorithm, ranks, nbytes, fabric=fab, protocol=p, **options)
        if out is None or t < out[1]:
            out = (p, t)
    return out
