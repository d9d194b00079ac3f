"""Refuse a scenario whose schedule cannot fit in memory, before allocating it.

A transfer-by-transfer schedule costs about ``BYTES_PER_TRANSFER`` from the moment it is built
until its results are written (schedule arrays, dependency CSR, the flow engine's node and path
state, the CSV text); measured on this project's machines: a 1 GiB ring all-reduce over the
2,048 hosts of fat_tree k=16 (2.1 M transfers) peaks at 1.8 GB, a GPT-3 175B step on 4,096
GPUs (4.9 M transfers) at 3.5 GB: 700-900 bytes each. The estimate is meant to round up;
what to change comes with it (docs/scale.md).

Three checks, each before the allocation it covers:

* ``check_file``: a scenario file before it is parsed, from its size and a count of its flow
  records (``"src"``): the parsed tables (``PARSED_BYTES_PER_BYTE`` per byte of file) plus
  the transfers the flows become.
* ``check_transfers``: a workload's transfer count before its schedule is built.
* ``check_flow_paths``: explicit flows before their schedule is built, with the hops their
  paths take sampled on the fabric: a transfer's path state grows with its hops
  (``BYTES_PER_HOP`` beyond the ``HOPS_INCLUDED`` the per-transfer figure was measured with),
  and on a 3,000,000-host chain a random pair is a million hops apart.

The budget is ``SHARE`` of the machine's available memory, or ``NETCOSIM_MEMORY_BUDGET`` (a
size such as ``"8GiB"``) when that is set: to plan for a smaller share of a shared machine,
or, in tests, to make a small input trip a guard.
"""
from __future__ import annotations

import os

import numpy as np

from netcore.flow.memory import NODE_STATE_BYTES
from topo.errors import OverBudget
from topo.arrays import unique

BYTES_PER_TRANSFER = 1000
BASE_BYTES = 400 << 20  # interpreter, compiled kernels, topology and routing tables
# the share of the machine's available memory a run may plan to use
SHARE = 0.85
BUDGET_ENV = "NETCOSIM_MEMORY_BUDGET"
# set by `netcosim sweep` for its local worker processes: each plans on its share of the room
# left, since the room each one measures does not hold back what the others will still take
# (two workers of the co-design study together outgrew 24 GB where each one's check passed)
WORKERS_ENV = "NETCOSIM_SHARE_WORKERS"
# A parsed JSON or TOML scenario: 11-13 bytes of Python tables per byte of JSON, 12-15 of TOML
# (1,000,000 flows in 38 MB of JSON: 430 MB; a 3,000,000-host chain in 76 MB: 970 MB; peaks
# while parsing, the file's bytes and text included)
PARSED_BYTES_PER_BYTE = 16
# One explicit flow's parsed table, kept for the whole run (the 430 MB above / 1,000,000)
FLOW_TABLE_BYTES = 450
# Path state per hop of a transfer, beyond the hops BYTES_PER_TRANSFER was measured with:
# 1,000 random flows on a 20,000-host chain (6.7 M hops) took 730 MB more than 2 flows
# (routing's CSR, the engine's per-link entries, the path column of flows.csv): 110 bytes
BYTES_PER_HOP = 128
# Chakra export: the protobuf messages of every rank, held until written (a send and a
# receive per transfer). A double-binary-tree all-reduce on fat_tree k=16 / 24 / 40 (0.26 M /
# 0.89 M / 4.1 M nodes) peaked at 0.78 / 2.56 / 11.6 GB: 2.85 KB per node, schedule included
CHAKRA_BYTES_PER_NODE = 2048
HOPS_INCLUDED = 6
# The scalable form of a training step (network_detail = "auto") on the flow engine: what its
# run adds to the built schedule, which is resident when the guard after the build runs (the
# room it is held to is measured then). Three parts (measured in session 34):
# * the engine's state per schedule node (netcore/flow/memory.py, NODE_STATE_BYTES); the
#   nodes splitting uneven sets adds (netcore/flow/uneven_split) are left to the engine, which
#   checks them exactly before it splits: this guard counted all but one member of every node's
#   set, up to as many pieces as flows, and refused SHARP steps of the co-design study whose
#   millions of single transfers made that allowance up to 22 GB where none split;
# * the paths of the member connections, routed once per distinct member set (every node naming
#   a set shares its routing and its folded path), once per plane where planes stripe them:
#   MEMBER_BYTES each, from the peak of routing and folding them into link classes (GPT-3 on
#   16,384 FullFlat GPUs of 8 planes: 65,536 members, 1.58 M path entries, about 1.4 K a
#   member and plane); a single transfer (no set) is its node and a path entry (ENTRY_BYTES):
#   GPT-3 on 1,024 GPUs with SHARP trees, 6.76 M single transfers, added 2.86 GB in all;
# * routing's distance rows (routing_rows_bytes).
# Before session 34 every node was counted with all its set's members and a flat 50 bytes: the
# 1.8T MoE step on 32,768 FullFlat GPUs (4.28 M nodes naming 4,160 sets of 622,592 members)
# was estimated at 56.7 GiB for 275.8 M member connections and refused, where its run adds
# 1.9 GB to the 1.9 GB of its schedule (node state, 443 bytes a node, not its members); the
# SHARP step above was estimated at 1.8 GB and added 2.86
MEMBER_BYTES = 1536
# One node of a built training schedule, from the base up (its arrays, the dependency CSR and
# the columns the engines add): Mixtral 8x7B on 64 GPUs with 8 / 80 / 400 micro-batches (0.075 /
# 0.74 / 3.69 M nodes) held 577 bytes a node once built; the whole run of the last peaked at
# 3.46 GB, against 8.4 GB estimated with the flow engine's routes and state (routed_bytes, with
# the split allowance it had until session 35)
SCHEDULE_NODE_BYTES = 640
# flows whose hop counts are measured to estimate the mean: one breadth-first search each,
# at most HOP_SAMPLE_WORK node visits in all (16 on a 3,000,000-node chain, about 5 s)
HOP_SAMPLE = 32
HOP_SAMPLE_MIN = 8
HOP_SAMPLE_WORK = 50_000_000


def available_bytes() -> int:
    """Memory the run may use: the least of MemAvailable (Linux, else physical memory), the
    room left under this process's address-space limit (``ulimit -v``: a run past it dies of
    MemoryError) and the room left in its cgroup (a container's memory limit: past it the
    kernel kills the process, and MemAvailable reports the whole host)."""
    have = _machine_bytes()
    for room in (_rlimit_room(), _cgroup_room()):
        if room is not None:
            have = min(have, room)
    return max(int(have), 0)


def _machine_bytes() -> int:
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


_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a number near 2**63
CGROUP_ROOT = "/sys/fs/cgroup"
PROC_CGROUP = "/proc/self/cgroup"


def _status_bytes(key: str) -> int | None:
    """A ``kB`` figure of /proc/self/status (``VmSize``) in bytes, None when unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _rlimit_room() -> int | None:
    """Address space left under RLIMIT_AS (``ulimit -v``), None when there is no limit."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0 or soft >= _UNLIMITED:
        return None
    used = _status_bytes("VmSize") or 0
    return max(soft - used, 0)


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as fh:
            raw = fh.read().strip()
    except OSError:
        return None
    if not raw or raw == "max":
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def _cgroup_room() -> int | None:
    """Memory left in this process's cgroup (v2 ``memory.max`` - ``memory.current``, or v1
    ``memory.limit_in_bytes`` - ``memory.usage_in_bytes``), None when there is no limit."""
    base = CGROUP_ROOT
    pairs = []
    try:
        with open(PROC_CGROUP, encoding="ascii") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) != 3:
                    continue
                rel = parts[2].lstrip("/")
                if parts[0] == "0" and parts[1] == "":
                    d = os.path.join(base, rel)
                    pairs.append((os.path.join(d, "memory.max"), os.path.join(d, "memory.current")))
                elif "memory" in parts[1].split(","):
                    d = os.path.join(base, "memory", rel)
                    pairs.append((os.path.join(d, "memory.limit_in_bytes"),
                                  os.path.join(d, "memory.usage_in_bytes")))
    except OSError:
        pass
    # inside a container the process's own cgroup is mounted at the root
    pairs += [(os.path.join(base, "memory.max"), os.path.join(base, "memory.current")),
              (os.path.join(base, "memory", "memory.limit_in_bytes"),
               os.path.join(base, "memory", "memory.usage_in_bytes"))]
    rooms = []
    for lim_path, use_path in pairs:
        lim = _read_int(lim_path)
        if lim is None or lim >= _UNLIMITED:
            continue
        rooms.append(max(lim - (_read_int(use_path) or 0), 0))
    return min(rooms) if rooms else None


def budget() -> tuple[int, str]:
    """(bytes a run may plan to use, the words that say where that figure came from)."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if raw:
        from netcore.sizes import parse_bytes

        b = parse_bytes(raw, BUDGET_ENV, allow_zero=False)
        return b, f"{BUDGET_ENV} = {raw} allows {_gb(b)}"
    have = available_bytes()
    try:
        workers = max(1, int(os.environ.get(WORKERS_ENV, "1") or 1))
    except ValueError:
        workers = 1
    if workers > 1:
        return (int(SHARE * have / workers),
                f"{_gb(have)} is available to {workers} sweep workers (each plans on "
                f"{SHARE / workers:.0%} of it; --jobs 1 gives one point all of it)")
    return int(SHARE * have), f"{_gb(have)} is available (a run plans on {SHARE:.0%} of it)"


def estimate_bytes(n_transfers: int) -> int:
    return BASE_BYTES + int(n_transfers) * BYTES_PER_TRANSFER


def check_bytes(need: int, lead: str, hint: str) -> None:
    """OverBudget "<lead> about <need> of memory, but <budget>; <hint>" when ``need`` bytes
    exceed the budget: one line with the estimate, the memory there is and what to change."""
    allowed, have = budget()
    if need > allowed:
        raise OverBudget(f"{lead} about {_gb(need)} of memory, but {have}; {hint}")


def check_transfers(n_transfers: int, where: str, what: str, hint: str,
                    delays: int = 0) -> None:
    """InputError (exit 2 from the CLI) when ``n_transfers`` point-to-point transfers (and
    ``delays`` delay nodes, e.g. a step latency before each transfer) cannot fit; the message
    gives the estimate, the memory there is, and ``hint``."""
    extra = f" and {delays:,} delay nodes" if delays else ""
    check_bytes(estimate_bytes(n_transfers + delays),
                f"{where}: {what} is {n_transfers:,} transfers{extra},", hint)


def routed_members(schedule) -> tuple[int, int]:
    """``(members, singles)`` of a scalable-form ``schedule`` as the flow engine routes it: the
    member connections of every distinct set its transfers name, each once, and its single
    transfers (one path each, no set). The nodes splitting uneven sets may add are not counted:
    only routing tells which sets are uneven, and the engine checks the split exactly before
    making it (netcore/flow/engine.py, ``_check_split``)."""
    from netcore.schedule import TRANSFER

    tr = schedule.kind == TRANSFER
    ms = schedule.mset[tr] if schedule.has_members else np.full(int(tr.sum()), -1)
    named = ms[ms >= 0]
    members = int(schedule.sets.sizes[unique(named)].sum()) if named.size else 0
    return members, int((ms < 0).sum())


def routing_rows_bytes(topology) -> int:
    """Routing's distance rows at their peak when every host is a destination: a row (4 bytes
    per node of the fabric) per switch a host hangs on, or per host where hosts forward or hang
    on other hosts (topo/routing.py, anchored walks). Past the row cache the rows are made in
    chunks of the cache's size, two of them held at once: at most twice the cache."""
    from topo.routing import DEFAULT_CACHE_BYTES

    nh = topology.n_hosts
    if topology.hosts_forward:
        rows = nh
    else:
        src = np.asarray(topology.dlink_src, dtype=np.int64)
        dst = np.asarray(topology.dlink_dst, dtype=np.int64)
        out = src < nh
        on_host = unique(src[out & (dst < nh)])  # hosts hanging on a host: rows of their own
        rows = unique(dst[out & (dst >= nh)]).size + on_host.size
    return int(min(2 * DEFAULT_CACHE_BYTES, 2 * rows * topology.n_nodes * 4))


def routed_bytes(n_nodes: int, paths: tuple, topology) -> int:
    """What the flow engine adds to a built scalable-form schedule of ``n_nodes`` nodes with
    ``paths`` = ``routed_members(schedule)``: its node state, the set members' paths and the
    single transfers' entries (once per plane where a fabric's planes stripe every
    connection), and routing's rows."""
    from netcore.flow.memory import ENTRY_BYTES
    from topo.builders.fullflat import dlink_planes

    members, singles = (int(x) for x in paths)
    planes = dlink_planes(topology)
    stripes = 1 if planes is None else int(planes.max()) + 1
    return (int(n_nodes) * NODE_STATE_BYTES
            + stripes * (members * MEMBER_BYTES + singles * ENTRY_BYTES)
            + routing_rows_bytes(topology))


def check_member_routes(n_nodes: int, n_members: int, paths: tuple, topology, where: str,
                        what: str, hint: str) -> None:
    """InputError when a built scalable-form schedule (``n_nodes`` nodes whose transfers stand
    for ``n_members`` member connections; ``paths`` = ``routed_members``) cannot also hold the
    flow engine's routes and state on ``topology``: what they add is held to the room left
    now, beside the schedule."""
    check_bytes(routed_bytes(n_nodes, paths, topology),
                f"{where}: {what} is {int(n_nodes):,} schedule nodes standing for "
                f"{int(n_members):,} member connections, {int(paths[0]):,} distinct ones in "
                f"member sets to route,", hint)


def check_schedule(n_nodes: int, n_members: int, routed: bool, where: str, what: str,
                   hint: str, paths: tuple, topology) -> None:
    """InputError when a schedule of ``n_nodes`` nodes whose transfers stand for ``n_members``
    member connections (``paths`` as ``routed_members`` counts them) cannot be built and run:
    the schedule itself, then either the flow engine's routes and state on ``topology``
    (``routed``) or one transfer per member (an engine that runs every transfer). Checked
    before the schedule is built, from an estimate of its size."""
    n_nodes, n_members = int(n_nodes), int(n_members)
    run = (routed_bytes(n_nodes, paths, topology) if routed
           else n_members * BYTES_PER_TRANSFER)
    check_bytes(BASE_BYTES + n_nodes * SCHEDULE_NODE_BYTES + run,
                f"{where}: {what} is about {n_nodes:,} schedule nodes standing for "
                f"{n_members:,} member connections, which need", hint)


def check_chakra(n_nodes: int, where: str, hint: str = "use a smaller workload") -> None:
    """InputError when a schedule of ``n_nodes`` nodes cannot be held as Chakra messages
    (``netcosim export --chakra`` makes every rank's protobuf messages before writing);
    ``hint``: what makes the workload smaller (a training step has no ranks or chunks)."""
    check_bytes(BASE_BYTES + int(n_nodes) * (BYTES_PER_TRANSFER + CHAKRA_BYTES_PER_NODE),
                f"{where}: the workload's {int(n_nodes):,} schedule nodes as Chakra messages "
                f"need", hint)


def check_file(path, size: int, data: bytes | None = None) -> None:
    """A scenario file of ``size`` bytes. Without ``data``, before it is read: its bytes must
    fit. With ``data`` (its bytes), before it is parsed: its parsed tables plus the transfers
    its flow records (counted as ``"src"`` keys) become."""
    if data is None:
        check_bytes(BASE_BYTES + int(size), f"scenario file {str(path)!r}: {_mb(size)} needs",
                    "use a smaller file, or a machine with more memory")
        return
    flows = data.count(b'"src"' if str(path).lower().endswith(".json") else b"src")
    need = BASE_BYTES + PARSED_BYTES_PER_BYTE * int(size) + flows * BYTES_PER_TRANSFER
    what = f"{_mb(size)}" + (f" with about {flows:,} flows" if flows else "")
    hint = "split the flows over several scenarios" if flows else "use a smaller file"
    check_bytes(need, f"scenario file {str(path)!r}: {what} needs, to load and run,",
                f"{hint}, or a machine with more memory")


def check_flow_paths(topology, flows: list, where: str) -> None:
    """Explicit ``flows`` (their tables, not yet checked) before their schedule is built: the
    transfers, their tables and their paths, with the mean hop count measured on a sample of
    them. The hop count is only sampled when the paths could matter at all."""
    n = len(flows)
    base = BASE_BYTES + n * (BYTES_PER_TRANSFER + FLOW_TABLE_BYTES)
    allowed, _ = budget()
    worst = base + n * max(0, topology.n_nodes - 1 - HOPS_INCLUDED) * BYTES_PER_HOP
    if worst <= allowed:
        check_bytes(base, f"{where}: {n:,} flows need", "split the flows over several scenarios")
        return
    hops = mean_hops(topology, flows)
    need = base + int(n * max(0.0, hops - HOPS_INCLUDED) * BYTES_PER_HOP)
    check_bytes(need, f"{where}: {n:,} flows over paths of about {hops:,.0f} hops on average "
                      f"need", "use fewer flows, or flows between closer hosts")


def mean_hops(topology, flows: list) -> float:
    """Mean shortest-path hops of a sample of flows spread evenly over ``flows``
    (deterministic); entries that are not valid flows are left out (the build names them)."""
    from topo.routing import Routing

    n_hosts = topology.n_hosts
    k = min(len(flows), HOP_SAMPLE, max(HOP_SAMPLE_MIN, HOP_SAMPLE_WORK // topology.n_nodes))
    at = unique(np.linspace(0, len(flows) - 1, k).astype(np.int64))
    src, dst = [], []
    for i in at.tolist():
        f = flows[i]
        if not isinstance(f, dict):
            continue
        s, d = f.get("src"), f.get("dst")
        if all(type(x) is int and 0 <= x < n_hosts for x in (s, d)) and s != d:
            src.append(s)
            dst.append(d)
    if not src:
        return 0.0
    src, dst = np.array(src), np.array(dst)
    routing = Routing(topology, "shortest", cache_bytes=0)
    uniq = unique(dst)
    # a few distance rows at a time: a row is 4 bytes per node (12 MB on a 3M-node chain)
    step = max(1, (64 << 20) // (4 * topology.n_nodes))
    total = 0
    for c in range(0, len(uniq), step):
        chunk = uniq[c:c + step]
        rows = routing.distances(chunk)
        pick = np.isin(dst, chunk)
        h = rows[np.searchsorted(chunk, dst[pick]), src[pick]]
        total += int(h[h > 0].sum())  # unreachable (-1) pairs carry no path
    return total / len(src)


def _shaped_transfers(op: str, algorithm: str, n: int, dims, group_size,
                      leader=None) -> int | None:
    """Exact per-chunk transfer counts of the collectives whose count follows from a shape:
    a torus all-reduce is a ring all-reduce along each dimension (2 (d - 1) n transfers per
    dimension of size d); a hierarchical one is a reduce-scatter and an all-gather inside
    groups of g plus a ring all-reduce across the n / g groups. A hierarchical all-to-all
    over G = n / g groups (collectives/all_to_all.py): with rail leaders n (g - 1) transfers
    inside the groups and n (G - 1) along the rails; with node leaders n (g - 1) inside, a
    gather to and a scatter from the leader per off-group side of each non-leader
    (4 (g - 1) (G - 1)) and G (G - 1) between the leaders. None without the shape (the
    caller's bound of 2 n (n - 1) stands: 536 M at 16,384 ranks, where a 32 x 32 x 16 torus
    all-reduce has 2.5 M, and the node-leader all-to-all over 2,048 nodes of 8 has 4.4 M:
    the bound refused the 4,096-rank all-to-all the automatic choice takes on two_tier, 2.1 M
    transfers, for 33.5 M)."""
    g = _groups_of(n, group_size) if algorithm == "hierarchical" else None
    if op in ("all_to_all", "all_to_all_v") and g is not None:
        G = n // g
        if leader == "rail":
            return n * (g - 1) + n * (G - 1)
        return n * (g - 1) + 4 * (g - 1) * (G - 1) + G * (G - 1)
    if op != "all_reduce":
        return None
    if algorithm == "torus" and dims is not None:
        try:
            d = [int(x) for x in dims]
        except (TypeError, ValueError):
            return None
        if not d or min(d) < 1 or int(np.prod(d, dtype=np.int64)) != n:
            return None
        return sum(2 * (x - 1) * n for x in d)
    if g is not None:
        return 2 * (g - 1) * n + 2 * (n // g - 1) * n
    return None


def _groups_of(n: int, group_size) -> int | None:
    """A hierarchical algorithm's ``group_size`` as an int that divides ``n``, else None (the
    builder refuses it; the caller's bound stands)."""
    if group_size is None:
        return None
    try:
        g = int(group_size)
    except (TypeError, ValueError):
        return None
    return g if g >= 1 and n % g == 0 else None


def _gb(b: float) -> str:
    if b >= 1 << 1000:  # beyond a float (a count of 10**400 transfers): "integer division
        # result too large for a float" stopped the CLI where the refusal was due
        return f"about 10^{len(str(int(b))) - 1} bytes"
    if b >= 1 << 40:
        return f"{b / (1 << 40):,.1f} TiB"
    if b < 1 << 30:
        return f"{b / (1 << 20):,.0f} MiB"
    return f"{b / (1 << 30):,.1f} GiB"


def _mb(b: float) -> str:
    return f"{b / 1e6:,.1f} MB" if b >= 1e5 else f"{int(b):,} bytes"


def collective_transfers(op: str, algorithm: str, n: int, chunks: int = 1, dims=None,
                         group_size=None, pairs=None, leader=None) -> int:
    """Transfers of a collective's full schedule (upper bounds where the count depends on a
    shape that is not given: a torus all-reduce's ``dims``, a hierarchical all-reduce's or
    all-to-all's ``group_size``; a send_recv's ``pairs``, by default the n - 1 neighbours
    k -> k + 1). ``leader``: a hierarchical all-to-all's (None: the builder's, "node")."""
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
    shaped = _shaped_transfers(op, algorithm, n, dims, group_size, leader)
    if shaped is not None:
        return shaped * c
    per_chunk = {
        ("all_reduce", "ring"): 2 * (n - 1) * n,
        ("all_reduce", "bidirectional_ring"): 4 * (n - 1) * n,
        ("all_reduce", "double_binary_tree"): 4 * (n - 1),
        ("all_reduce", "recursive_halving_doubling"): 2 * n * max(1, math.ceil(math.log2(n))) + 2 * n,
        ("reduce_scatter", "ring"): (n - 1) * n,
        ("all_gather", "ring"): (n - 1) * n,
        ("broadcast", "ring"): n - 1, ("broadcast", "tree"): n - 1,
        ("reduce", "ring"): n - 1, ("reduce", "tree"): n - 1,
        # one transfer per pair (collectives/p2p.py); it counted 1, so 20,460,000 transfers
        # over 1,024 ranks passed a 2 GiB budget and died of MemoryError
        ("send_recv", "direct"): n - 1 if pairs is None else max(1, len(pairs)),
        # one transfer per ordered pair (collectives/all_to_all.py)
        ("all_to_all", "direct"): n * (n - 1), ("all_to_all", "pairwise"): n * (n - 1),
    }.get((op, algorithm), 2 * n * (n - 1))  # the rest, unshaped: <= 2n^2
    return per_chunk * c
