"""What to offer when a collective cannot be built as asked: the remedies a refusal names.

A refusal must offer only what works where it is given: the scalable form (a stream) not to a
consumer of every transfer (Chakra export, ns-3), another all-to-all only when its full
schedule fits in memory, `netcosim collective`'s flags instead of scenario keys. The memory
guard's hint (``guard_hint``) and the analytical estimate's refusal of an all-pairs collective
(``estimate_refused``) are worded here; ``building_in_full`` tells them who needs every
transfer.
"""
from __future__ import annotations

import contextvars

import numpy as np

from topo.arrays import unique
from topo.errors import InputError


def guard_hint(op_c: str, algo: str, detail: str, n: int = 0, opts: dict | None = None,
                where: str = "", spec: dict | None = None, chunks=None,
                group: int | None = None) -> str:
    """What to change when a collective's full schedule over ``n`` ranks (``opts``: its
    options; ``chunks``: its chunk count, default opts' or 1; ``group``: ranks per group of
    the fabric, for a hierarchical all-to-all) cannot fit: only what makes it smaller or
    runs it otherwise. ``where`` "--engine E" words it as `netcosim collective`'s flags.
    It offered "chunks" where there was one chunk already, the stream form to consumers that
    need every transfer (Chakra export, ns-3) and "network_detail" to the CLI, which has no
    such key; and "(the packet engine runs every transfer)" read as a remedy on the flow
    engine, where the packet engine holds at least as much."""
    import math

    from collectives.streams import PHASED_STREAMS, RING_STREAMS
    from netcosim.workloads import scenario_engine

    cli = where.startswith("--engine ")
    engine = where.split()[1] if cli else scenario_engine()
    spec, opts = spec or {}, opts or {}
    given = int(opts.get("chunks") or 1)  # the user's chunks (1: none given)
    chunks = int(chunks if chunks is not None else given)
    ways = ["fewer --ranks" if cli else "fewer ranks"]
    if chunks > 1:
        ways.append(("fewer --chunks" if cli else "fewer chunks") +
                    ("" if "chunks" in opts else f" ({chunks} by default)"))
    if op_c in ("all_to_all", "all_to_all_v") and n > 1:
        # another all-to-all whose full schedule fits (with the delays a protocol adds):
        # the node leaders' schedule over many small groups is the smallest, direct's over
        # few large ones
        mine = (algo, (opts.get("leader") or "node") if algo == "hierarchical" else None)
        for f in full_forms(op_c, n, group, chunks):
            same = f[:2] == mine or {f[0], mine[0]} == {"direct", "pairwise"}
            if not same and not (cli and f[1] == "rail") and _fits_with_delays(f[2]):
                name = ("--algo " if cli else "algorithm = ") + _form_name(
                    f, cli, True, explicit="leader" in opts)
                ways.append(f"{name} ({f[2]:,} transfers)")
    needs = full_detail_for()
    change, what = [], None  # what turns it into a stream form (collectives/streams.py)
    extra = set(opts) - {"chunks", "step_latency_s", "protocol"}
    if needs is None and (op_c, algo) in PHASED_STREAMS and extra <= {"group_size", "dims"}:
        g, dims = opts.get("group_size"), opts.get("dims")
        try:
            shaped = (algo == "hierarchical" and g is not None and n % int(g) == 0) or \
                (algo == "torus" and dims is not None and math.prod(int(d) for d in dims) == n)
        except (TypeError, ValueError, ZeroDivisionError):
            shaped = False
        if shaped:  # phases of ring streams, with one chunk
            what = "phases of streams"
            if given > 1:
                change.append("--chunks 1" if cli else "chunks = 1")
    elif needs is None and (op_c, "ring") in RING_STREAMS and not extra:
        what = "one stream"
        if algo != "ring":
            change.append("--algo ring" if cli else 'algorithm = "ring"')
        if given > 1:  # one ring per rail on whole two_tier nodes streams one chunk only
            change.append("--chunks 1" if cli else "chunks = 1")
    if what is not None:
        if engine not in (None, "flow"):
            change.append("--engine flow" if cli else '[engine] kind = "flow"')
        if not cli and spec.get("network_detail") == "full":
            change.append('network_detail = "auto"')
        if change:
            ways.append(" with ".join(change) + f" ({what})")
    return "use " + ", or ".join(ways) + (f" ({needs} needs every transfer)" if needs else "")


def estimate_refused(e, lead: str, where: str = "workload", *, algorithm: str | None = None,
                     protocol_given: bool = False, engine: str | None = None,
                     group: int | None = None, chunks: int = 1,
                     leader: str | None = None) -> InputError:
    """The analytical estimate's refusal of an all-pairs collective (collectives/analytical.py,
    TooManyPairs), led by ``lead``: the field whose value asked for the estimate (the
    automatic choice of algorithm or protocol, the analytical engine; ending in ":" or
    ", and"), not the candidate the chooser was pricing: it said "workload.algorithm =
    'hierarchical'" for an algorithm nobody gave, with "a ring/tree algorithm", which an
    all-to-all has not. ``algorithm``: the one given (None: chosen); ``protocol_given``: a
    protocol was given; ``group``: ranks per group of the fabric (the hierarchical
    all-to-all's group_size), ``leader`` its leaders if given; ``where`` "--engine E" words
    it as `netcosim collective`'s flags, whose analytical engine (``engine``) estimates
    always. What it offers: fewer ranks; the op's algorithms the model prices without all
    pairs; giving what the engines run without an estimate, naming the algorithms whose
    full schedule fits in memory (another all-to-all's where the given one's does not).
    When none fits, the memory refusal (on ``where.op``) is the one to give."""
    from collectives import protocols
    from netcosim.memory_guard import check_bytes, estimate_bytes

    cli = where.startswith("--")
    op, n = e.op, e.n
    ways = ["fewer --ranks" if cli else "fewer ranks"]
    instead = [a for a in e.instead() if a != algorithm]
    if instead:
        ways.append("--algo " + _or(instead) if cli else
                    "algorithm = " + _or(repr(a) for a in instead))
    every = full_forms(op, n, group, chunks)
    if cli:  # the command lays no rail leaders for a given --algo (only --algo auto does)
        every = [f for f in every if f[1] != "rail"]
    if not e.all_to_all:  # the other ops' ring and trees are priced (above) and stream
        every = [f for f in every if f[0] == algorithm]
    mine = [f for f in every if algorithm is None or
            (f[0] == algorithm and f[1] in (None, leader or "node"))]
    fit = [f for f in mine if _fits_with_delays(f[2])]
    switch = not fit and algorithm is not None  # another algorithm's full form may fit
    if switch:
        fit = [f for f in every if f not in mine and _fits_with_delays(f[2])]
    need = []
    if (algorithm is None or switch) and fit:
        # each algorithm once; a hierarchical all-to-all's leaders named only where the
        # builder's default (node leaders) does not fit
        names = []
        for f in fit:
            if f[0] not in [g[0] for g in names]:
                node = any(g[:2] == (f[0], "node") for g in fit)
                names.append(f if f[1] != "rail" or not node else (f[0], "node", f[2]))
        need.append(("--algo " if cli else f"{where}.algorithm = ") +
                    _or(_form_name(f, cli, True, explicit=switch and leader is not None)
                        for f in names))
    if not protocol_given:
        names = protocols.allowed(algorithm) if algorithm and not switch else protocols.NAMES
        need.append(("--protocol" if cli else f"{where}.protocol") + f" ({_or(names)})")
    analytical = engine == "analytical"
    if fit:
        if analytical:
            ways.append("--engine flow" + (" with " + " and ".join(need) if need else "") +
                        ", which runs without an estimate")
        elif need:
            ways.append("give " + " and ".join(need) + ", which the engines run without an "
                        "estimate")
    elif every and not analytical and e.all_to_all:
        # no full form fits: that, not the estimate, is what stops this all-to-all (the
        # other ops' ring, offered above, streams)
        least = min(every, key=lambda f: f[2])
        check_bytes(estimate_bytes(least[2]),
                    (f"--op {op}" if cli else f"{where}.op = {op!r}") +
                    f": over {n:,} ranks its smallest full schedule ({_form_name(least, cli)})"
                    f" is {least[2]:,} transfers,", "use " + ways[0])
    return InputError(f"{lead} {e.fact()}; use " + ", or ".join(ways))


def full_forms(op: str, n: int, group: int | None = None,
               chunks: int = 1) -> list[tuple[str, str | None, int]]:
    """``(algorithm, leader, transfers)`` of the full schedules of ``op`` over ``n`` ranks
    that any fabric takes (no in-network reduction, no torus dims): for an all-to-all direct,
    pairwise and, with ``group`` ranks per fabric group, the hierarchical one with node and
    with rail leaders (leader None: not a hierarchical all-to-all)."""
    import collectives
    from netcosim.memory_guard import collective_transfers

    g = int(group) if group and group > 1 and n % int(group) == 0 and n > group else None
    out = []
    for a in collectives.ALGORITHMS.get(op, ()):
        if a in ("nvls", "sharp", "nvls_tree", "torus") or (a == "hierarchical" and g is None):
            continue
        if a == "hierarchical" and op in ("all_to_all", "all_to_all_v"):
            for leader in ("node", "rail"):
                out.append((a, leader, collective_transfers(op, a, n, chunks, group_size=g,
                                                            leader=leader)))
        else:
            out.append((a, None, collective_transfers(op, a, n, chunks, group_size=g)))
    return out


def _fits_with_delays(transfers: int) -> bool:
    """Whether ``transfers`` fit with the most delay nodes a protocol adds beside them (a step
    latency before each, LL's throughput cap after it)."""
    from netcosim.memory_guard import budget, estimate_bytes

    return estimate_bytes(3 * int(transfers)) <= budget()[0]


def _form_name(form, cli: bool, quoted: bool = False, explicit: bool = False) -> str:
    """A full form as the user would ask for it: "hierarchical" (node leaders, the
    builder's default), "'hierarchical' with options.leader = 'rail'", "--algo direct";
    ``explicit``: the node leaders named too (the options in force name other leaders)."""
    algo, leader, _ = form
    name = repr(algo) if quoted and not cli else algo
    if not cli and (leader == "rail" or (leader == "node" and explicit)):
        return f"{name} with options.leader = {leader!r}"
    return name


def fabric_group(topology, ranks) -> int | None:
    """Ranks per group when ``ranks`` come in equal runs of more than one of one
    ``host_group`` each (the GPUs of a node on two_tier), else None: the group_size a
    hierarchical algorithm takes from the fabric."""
    if topology is None:
        return None
    if ranks is None:
        ranks = np.arange(topology.n_hosts)
    ranks = np.asarray(ranks, dtype=np.int64)
    if not ranks.size:
        return None
    g = np.asarray(topology.host_group)[ranks]
    cuts = np.flatnonzero(np.diff(g)) + 1
    runs = np.diff(np.concatenate([[0], cuts, [len(g)]]))
    if len(unique(g)) == len(runs) and (runs == runs[0]).all() and runs[0] > 1:
        return int(runs[0])
    return None


def _or(names) -> str:
    """'a', 'a or b', 'a, b or c'."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


# A consumer that needs every point-to-point transfer (Chakra export, ns-3) while it builds
# the workload: the scalable form is no remedy there (Scenario.with_full_detail)
_FULL_FOR: contextvars.ContextVar = contextvars.ContextVar("full_detail_for", default=None)


def full_detail_for() -> str | None:
    """The consumer the workload is being built for in full (e.g. "Chakra export"), or None."""
    return _FULL_FOR.get()


class building_in_full:
    """``with building_in_full("Chakra export"): ...``: the workload built inside is for a
    consumer of every transfer; memory refusals then offer no scalable form."""

    def __init__(self, consumer: str):
        self.consumer = consumer

    def __enter__(self):
        self._token = _FULL_FOR.set(self.consumer)
        return self

    def __exit__(self, *exc):
        _FULL_FOR.reset(self._token)
        return False
