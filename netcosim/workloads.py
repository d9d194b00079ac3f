"""Workload kinds: the ``[workload]`` table of a scenario -> a Schedule.

A kind is registered with ``register_workload(kind, builder, keys, report=None)``:

* ``builder(topology, spec, where, seed) -> Schedule`` receives the whole ``[workload]`` table
  (``spec``, including ``kind``), ``where`` = "workload" to name fields in errors, and the
  scenario seed. It raises InputError naming ``where.<key>`` for bad values.
* ``keys``: the keys the table may hold besides ``kind``; any other key is refused before the
  builder runs (strict scenarios).
* ``report(spec, schedule, result) -> dict`` (optional): workload figures for summary.json
  (``algbw_GBps``/``busbw_GBps`` for a collective, ``step_time_s``/``mfu`` for training).

``collective`` and ``flows`` are built in. Kinds owned by other packages register themselves
from a module in ``netcosim/workload_kinds/`` that defines ``register(register_workload)``;
those modules are imported the first time a kind is looked up.
"""
from __future__ import annotations

import contextvars
import importlib
import pkgutil
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from netcosim.collective_remedies import estimate_refused, fabric_group, guard_hint
from netcosim.units import is_int, parse_bytes, parse_us, short_repr
from topo.errors import InputError


@dataclass(frozen=True)
class WorkloadKind:
    kind: str
    builder: Callable
    keys: frozenset
    report: Callable | None = None


_REGISTRY: dict[str, WorkloadKind] = {}
_DISCOVERED = False
# Kinds the scenario contract names whose builders come from other parts of the project.
PLANNED = ("collective", "flows", "training", "chakra", "inference")


def register_workload(kind: str, builder: Callable, keys, report: Callable | None = None):
    """Add (or replace) a workload kind; see the module docstring for the signatures."""
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"workload kind {kind!r} must be a non-empty string")
    keys = frozenset(keys)
    if "kind" in keys:
        keys = keys - {"kind"}
    _REGISTRY[kind] = WorkloadKind(kind, builder, keys, report)


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    _DISCOVERED = True
    try:
        pkg = importlib.import_module("netcosim.workload_kinds")
    except ModuleNotFoundError:
        return
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        if hasattr(mod, "register"):
            mod.register(register_workload)


def available() -> list[str]:
    _discover()
    return sorted(_REGISTRY)


def get(kind, where: str = "workload") -> WorkloadKind:
    _discover()
    if kind in _REGISTRY:
        return _REGISTRY[kind]
    if kind in PLANNED:
        raise InputError(f"{where}.kind = {kind!r}: workload kind {kind!r} is not available "
                         f"yet in this build")
    known = sorted(set(PLANNED) | set(_REGISTRY))
    raise InputError(f"{where}.kind = {kind!r}: expected one of {', '.join(known)}")


def check_keys(spec: dict, where: str = "workload") -> None:
    """The strict key check for a [workload] table (used when a scenario is loaded)."""
    from netcosim.scenario import check_keys as strict

    if "kind" not in spec:
        raise InputError(f"{where}.kind: missing (one of {', '.join(PLANNED)})")
    kind = spec["kind"]
    if not isinstance(kind, str):
        raise InputError(f"{where}.kind = {kind!r}: expected a string")
    wk = get(kind, where)
    strict(spec, sorted(wk.keys | {"kind"}), where)


# What a workload builder may need to know about the scenario around it: the folder of the
# scenario file (traces name files relative to it) and its link faults (a builder that exploits
# symmetry must not when faults break it). A context variable, so concurrent builds do not see
# each other's.
_CONTEXT: contextvars.ContextVar = contextvars.ContextVar("workload_context",
                                                          default=(None, None, None, None))


def scenario_dir():
    """Folder of the scenario whose workload is being built (None outside a scenario)."""
    return _CONTEXT.get()[0]


def scenario_faults():
    """The scenario's ``LinkFaults`` while its workload is being built (None if unknown)."""
    return _CONTEXT.get()[1]


def scenario_engine():
    """The engine the scenario runs on (``flow``, ``packet``; None if unknown): only the flow
    engine carries the scalable representation of ``network_detail = "auto"``."""
    return _CONTEXT.get()[2]


def scenario_routing():
    """The scenario's ``Routing`` while its workload is being built (None if unknown): a
    builder that measures collectives on the fabric (the inference kind) routes as the run
    would."""
    return _CONTEXT.get()[3]


NETWORK_DETAILS = ("auto", "full")


def network_detail(spec: dict, where: str = "workload") -> str:
    """The ``network_detail`` a builder may use: ``auto`` (the default) becomes ``full`` when
    the engine cannot carry the scalable form (docs/scale.md)."""
    v = spec.get("network_detail", "auto")
    if not isinstance(v, str) or v not in NETWORK_DETAILS:
        raise InputError(f"{where}.network_detail = {v!r}: expected one of "
                         f"{', '.join(NETWORK_DETAILS)}")
    if v == "auto" and scenario_engine() not in (None, "flow"):
        return "full"
    return v


def build_workload(topology, spec: dict, where: str = "workload", seed: int = 0,
                   base_dir=None, faults=None, engine: str | None = None, routing=None):
    check_keys(spec, where)
    wk = get(spec["kind"], where)
    token = _CONTEXT.set((base_dir, faults, engine, routing))
    try:
        schedule = wk.builder(topology, spec, where, seed)
    finally:
        _CONTEXT.reset(token)
    schedule.meta.setdefault("workload", spec["kind"])
    try:
        schedule.validate(topology.n_hosts, topology.n_nodes)
    except InputError as e:
        raise _name_node(e, schedule, where) from None
    return schedule


def report(spec: dict, schedule, result) -> dict:
    """Workload figures for summary.json (empty when the kind has no report)."""
    wk = get(spec["kind"])
    if wk.report is None:
        return {}
    return dict(wk.report(spec, schedule, result))


_NODE_MSG = re.compile(r"^node (\d+): (.*)$", re.S)


def _name_node(e: InputError, schedule, where: str) -> InputError:
    """Turn the Schedule's "node 3: ..." into the scenario field that made node 3."""
    m = _NODE_MSG.match(str(e))
    field = schedule.meta.get("node_field")
    if m and field:
        return InputError(f"{field}[{m.group(1)}]: {m.group(2)}")
    return InputError(f"{where}: {e}")


# =========================================================================== helpers
def _host(v, field: str, n_hosts: int) -> int:
    if not is_int(v):
        raise InputError(f"{field} = {v!r}: expected a host id (an integer)")
    if not 0 <= v < n_hosts:
        raise InputError(f"{field} = {v}: host {v} does not exist (hosts are 0..{n_hosts - 1})")
    return v


# =========================================================================== flows
FLOW_KEYS = ("src", "dst", "bytes", "start_us", "deps")


def build_flows(topology, spec: dict, where: str, seed: int):
    """``[[workload.flows]]``: explicit point-to-point transfers with optional dependencies."""
    from netcore.schedule import Schedule
    from netcosim.scenario import check_keys as strict

    flows = spec.get("flows")
    if not isinstance(flows, list) or not flows:
        raise InputError(f"{where}.flows = {flows!r}: expected a non-empty array of tables "
                         f"([[{where}.flows]] with src, dst, bytes)")
    # the transfers and their paths, before anything per flow is built: on a long fabric a
    # flow's path is as costly as thousands of transfers (netcosim/memory_guard.py)
    from netcosim.memory_guard import check_flow_paths

    check_flow_paths(topology, flows, f"{where}.flows")
    n_hosts = topology.n_hosts
    src, dst, size, start, deps = [], [], [], [], []
    for i, f in enumerate(flows):
        at = f"{where}.flows[{i}]"
        if not isinstance(f, dict):
            raise InputError(f"{at} = {f!r}: expected a table with src, dst, bytes")
        strict(f, FLOW_KEYS, at)
        for key in ("src", "dst", "bytes"):
            if key not in f:
                raise InputError(f"{at}.{key}: missing")
        src.append(_host(f["src"], f"{at}.src", n_hosts))
        dst.append(_host(f["dst"], f"{at}.dst", n_hosts))
        size.append(parse_bytes(f["bytes"], f"{at}.bytes"))
        start.append(parse_us(f.get("start_us", 0.0), f"{at}.start_us") * 1e-6)
        d = f.get("deps", [])
        if not isinstance(d, list) or not all(is_int(x) for x in d):
            raise InputError(f"{at}.deps = {d!r}: expected an array of flow indices")
        for x in d:
            if not 0 <= x < len(flows):
                raise InputError(f"{at}.deps: flow {x} does not exist (flows are "
                                 f"0..{len(flows) - 1})")
        deps.append(d)
    sched = Schedule.from_transfers(src, dst, size, start=np.array(start), deps=deps,
                                    label="flow")
    sched.meta.update({"workload": "flows", "node_field": f"{where}.flows"})
    return sched


# =========================================================================== collective
COLLECTIVE_KEYS = ("op", "algorithm", "bytes", "bytes_matrix", "ranks", "chunks", "step_latency_us",
                   "protocol", "options", "network_detail")


def build_collective(topology, spec: dict, where: str, seed: int):
    """One collective over ``ranks`` (default: every host) via ``collectives.build``."""
    import collectives

    if not hasattr(collectives, "build"):
        raise InputError(f"{where}.kind = 'collective': workload kind 'collective' is not "
                         f"available yet in this build (collectives.build is missing)")
    op = spec.get("op")
    if not isinstance(op, str):
        raise InputError(f"{where}.op = {op!r}: expected a collective name such as "
                         f"\"all_reduce\"")
    n_hosts = topology.n_hosts
    ranks = spec.get("ranks", "all")
    if ranks == "all":
        ranks = list(range(n_hosts))
    elif isinstance(ranks, list):
        ranks = [_host(r, f"{where}.ranks[{i}]", n_hosts) for i, r in enumerate(ranks)]
    else:
        raise InputError(f"{where}.ranks = {ranks!r}: expected \"all\" or an array of host ids")
    # at least 2, distinct: before the choice and the protocols price them (no ranks gave
    # numpy's "Mean of empty slice" warnings above the error line)
    collectives._plan.check_ranks(ranks, f"{where}.ranks")
    if op == "all_to_all_v":
        # sizes per (sender, receiver): the matrix goes where the other ops take one size
        if "bytes" in spec:
            raise InputError(f"{where}.bytes: all_to_all_v takes {where}.bytes_matrix (bytes "
                             f"rank i sends to rank j), not one size")
        nbytes = _bytes_matrix(spec, len(ranks), f"{where}.bytes_matrix")
    else:
        if "bytes_matrix" in spec:
            raise InputError(f"{where}.bytes_matrix: only op = \"all_to_all_v\" takes a "
                             f"matrix; {op} takes {where}.bytes")
        if "bytes" not in spec:
            raise InputError(f"{where}.bytes: missing (the message size, e.g. \"256MiB\")")
        nbytes = parse_bytes(spec["bytes"], f"{where}.bytes", allow_zero=False)
    options = spec.get("options", {})
    if not isinstance(options, dict):
        raise InputError(f"{where}.options = {options!r}: expected a table")
    opts = dict(options)
    if "chunks" in spec:
        c = spec["chunks"]
        if not is_int(c) or c < 1:
            raise InputError(f"{where}.chunks = {c!r}: expected an integer >= 1")
        opts["chunks"] = c
    if "step_latency_us" in spec:
        field = f"{where}.step_latency_us"
        opts["step_latency_s"] = step_latency_s(parse_us(spec["step_latency_us"], field),
                                                field, short_repr(spec["step_latency_us"]))
    from collectives import protocols

    # NCCL's protocols (collectives/protocols.py): "auto" picks the least estimate per size
    protocol = protocols.resolve(spec.get("protocol", protocols.AUTO), f"{where}.protocol")
    algorithm = spec.get("algorithm", "auto")
    if not isinstance(algorithm, str):
        raise InputError(f"{where}.algorithm = {algorithm!r}: expected an algorithm name")
    if algorithm == "auto":
        if not hasattr(collectives, "choose"):
            raise InputError(f"{where}.algorithm: missing (automatic choice is not available "
                             f"in this build)")
        # chosen for the ranks that run it: chosen over all hosts, a subset ran what suits
        # them all (one node of a two_tier fabric with reducing switches took the NVLS-Tree
        # picked for two nodes, 32% slower than the ring picked for it; one GPU per node
        # took the hierarchical all-to-all and was refused for want of a group_size), and a
        # subset's all_to_all_v matrix was refused as the library's "nbytes" of the wrong
        # shape
        # ranks listed by the user run in their order, so the choice is made for that order
        # (its options, e.g. the rail leaders of a hierarchical all-to-all, are laid for it):
        # chosen in fabric order, a two_tier all-to-all of ranks listed in reverse within
        # each node ran the node-leader variant, 220.5 against 70.9 us, and all torus hosts
        # listed out of row-major order were refused for the torus algorithm's dims
        listed = "ranks" in spec and spec["ranks"] != "all"
        among = ranks if listed or len(ranks) != n_hosts else None
        from collectives.analytical import TooManyPairs

        try:
            choice = collectives.choose(topology, op, nbytes, among, protocol=protocol,
                                        keep_order=listed)
            algorithm, order, picked_opts = _chosen(choice)
        except TooManyPairs as e:  # no algorithm was given: name the choice, not its candidate
            lead = f"{where}.algorithm = 'auto'" if "algorithm" in spec else \
                f"{where}.algorithm: not given"
            raise estimate_refused(e, f"{lead}, so it is chosen by the analytical estimate:",
                                   where, protocol_given=protocol != protocols.AUTO,
                                   group=fabric_group(topology, ranks),
                                   chunks=opts.get("chunks") or 1) from None
        except InputError as e:
            raise _in(e, where) from None
        # the protocol picked with the algorithm (NCCL's tuner on whole two_tier nodes picks
        # both), unless chunks are given: then the least estimate for them, as the CLI does
        picked = getattr(choice, "protocol", None)
        if protocol == protocols.AUTO and isinstance(picked, str) and "chunks" not in opts:
            protocol = picked
        # a matrix's rows are the ranks in the order given: never reorder them; `ranks =
        # "all"` written out is the same as leaving it out (it was left in id order, which
        # differs from the chooser's on a custom fabric whose host_group is not monotone)
        if order is not None and not listed and op != "all_to_all_v":
            ranks = [int(r) for r in order]  # the ring order the chooser laid on the fabric
        # the options picked with the algorithm go with it when the ranks run in the order
        # they were picked for (leader = "rail" of the rail-aligned all-to-all, the trees of
        # an in-network algorithm): without them a two_tier all-to-all ran the node-leader
        # variant under the chooser's name, 2-4x slower (`netcosim collective` kept them)
        if isinstance(picked_opts, dict) and order is not None and \
                [int(r) for r in order] == ranks:
            for k, v in picked_opts.items():
                if k != "protocol":
                    opts.setdefault(k, v)
    before = set(opts)
    _fabric_defaults(collectives, op, algorithm, topology, ranks, opts, where)
    _check_options(collectives, op, algorithm, options, where)
    try:
        _guard_before_protocol(collectives, spec, op, algorithm, ranks, opts, where, topology)
        opts["protocol"] = _protocol(collectives, topology, op, algorithm, ranks, nbytes,
                                     opts, protocol, where, "protocol" in spec)
        sched = _collective_scalable(collectives, spec, op, algorithm, ranks, nbytes, opts,
                                     where, topology)
    except InputError as e:
        raise _option_named(e, where, options, set(opts) - before) from None
    if sched is not None:
        return _collective_meta(sched, op, algorithm, nbytes, ranks, "auto", opts["protocol"])
    try:
        sched = collectives.build(op, algorithm, ranks, nbytes, fabric=topology, **opts)
    except TypeError as e:
        m = re.search(r"unexpected keyword argument '(\w+)'", str(e))
        if not m:
            raise
        key = m.group(1)
        shown = "step_latency_us" if key == "step_latency_s" else key
        raise InputError(f"{where}.{shown if shown in spec else 'options.' + shown}: not an "
                         f"option of {op} {algorithm}") from None
    except InputError as e:
        raise _option_named(_in(e, where), where, options, set(opts) - before) from None
    # a collective's steps between two ranks share one connection (one ECMP hash), as NCCL's
    # persistent queue pairs do; the stream form keys its members alike
    sched.with_connections()
    return _collective_meta(sched, op, algorithm, nbytes, ranks, "full", opts["protocol"])


# parameters of the schedule builders that are not the user's to give under
# workload.options: the scenario passes ranks, the sizes and the fabric itself, and
# per_node lays rail rings for templates built without a fabric
_INTERNAL_OPTIONS = ("ranks", "nbytes", "matrix", "fabric", "per_node")
# options with a [workload] key of their own: still taken under options, but not offered there
_WORKLOAD_KEYED = ("chunks", "step_latency_s", "protocol")


def _check_options(collectives, op, algorithm, options: dict, where: str) -> None:
    """Every key of workload.options an option of the algorithm the user may give. The
    library's own refusal listed its internal parameters (fabric, per_node) as options and
    named no table; options.fabric and options.ranks even crashed the run."""
    import inspect

    if not options or not hasattr(collectives, "ALGORITHMS"):
        return
    op, algorithm = collectives.resolve(op, algorithm)  # checked by _fabric_defaults
    params = inspect.signature(collectives.ALGORITHMS[op][algorithm]).parameters
    public = [k for k, p in params.items() if k not in _INTERNAL_OPTIONS
              and not k.startswith("_") and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    for key, value in options.items():
        if key not in public:
            offered = [k for k in public if k not in _WORKLOAD_KEYED]
            which = (f"options: {', '.join(offered)}" if offered
                     else "it has no options of its own")
            raise InputError(f"{where}.options.{key} = {short_repr(value)}: not an option of "
                             f"{algorithm} {op} ({which}; chunks, protocol and "
                             f"step_latency_us are keys of {where} itself)")


def step_latency_s(us: float, field: str, shown: str | None = None) -> float:
    """A per-step latency given in us (``shown``: as the user wrote it), in seconds: from 0 up
    to the engines' clock end (2^62 ps), for the scenario's step_latency_us and `netcosim
    collective --step-latency-us` alike. The engines refuse a longer delay anyway, but as
    "workload: node 0: a duration of ..." after building the whole schedule, and 1e300 gave a
    300-digit time from the estimate."""
    from netcore.packet.limits import TIME_LIMIT_TEXT, TIME_LIMIT_US

    if not 0 <= us < TIME_LIMIT_US:  # NaN and inf too
        raise InputError(f"{field} = {shown or repr(us)}: expected a time from 0 up to (not "
                         f"including) {TIME_LIMIT_TEXT}, where the engines' clock ends")
    return us * 1e-6


def _guard_before_protocol(collectives, spec, op, algorithm, ranks, opts, where,
                           topology=None):
    """Refuse a full schedule that cannot fit even in its smallest form (one chunk, no delay
    nodes) before the protocol is chosen: ``protocol = "auto"`` prices the collective on the
    fabric first, rank pair by rank pair for an all-to-all (about a minute and 5 GB at 4,096
    ranks), only for the memory guard to refuse the schedule afterwards. The exact check,
    with the chosen protocol's chunks and delays, still follows (_collective_scalable)."""
    from collectives import rail
    from collectives.streams import PHASED_STREAMS, RING_STREAMS
    from netcosim.memory_guard import check_transfers, collective_transfers

    if op == "all_to_all_v":
        return
    try:
        op_c, algo = collectives.resolve(op, algorithm)
    except InputError:
        return  # reported with its field where the collective is built
    if network_detail(spec, where) == "auto" and (op_c, algo) in RING_STREAMS:
        return  # may run as one stream
    if network_detail(spec, where) == "auto" and (op_c, algo) in PHASED_STREAMS and \
            opts.get("chunks") in (None, 1):
        return  # may run as phases of streams (one chunk: their default)
    count = collective_transfers(op_c, algo, len(ranks), opts.get("chunks") or 1,
                                 opts.get("dims"), opts.get("group_size"), _pairs(opts),
                                 opts.get("leader"))
    # one ring (tree pair) per rail on whole two_tier nodes (collectives/rail.py)
    count *= rail.side_by_side(topology, op_c, algo, ranks)
    check_transfers(count, where, f"{op} {algo} over {len(ranks):,} ranks",
                    guard_hint(op_c, algo, network_detail(spec, where), len(ranks), opts,
                                where, spec, group=opts.get("group_size") or
                                fabric_group(topology, ranks)))


def _protocol(collectives, topology, op, algorithm, ranks, nbytes, opts, protocol, where,
              given: bool = True):
    """The protocol to build with: the one given, or for "auto" the least estimate
    (``given``: the user wrote workload.protocol)."""
    from collectives import protocols
    from collectives.analytical import TooManyPairs

    try:
        _, algo = collectives.resolve(op, algorithm)
        protocol = protocols.check_for(algo, protocol, f"{where}.protocol")
        if protocol != protocols.AUTO:
            return protocol
        return protocols.best(topology, op, algo, ranks, nbytes, **opts)[0]
    except TooManyPairs as e:  # the estimate was asked for by the protocol's automatic choice
        lead = f"{where}.protocol = 'auto'" if given else f"{where}.protocol: not given"
        raise estimate_refused(e, f"{lead}, so it is chosen by the analytical estimate:",
                               where, algorithm=algo, chunks=opts.get("chunks") or 1,
                               group=opts.get("group_size") or fabric_group(topology, ranks),
                               leader=opts.get("leader")) from None
    except InputError as e:
        raise _in(e, where) from None


def _collective_meta(sched, op, algorithm, nbytes, ranks, detail: str, protocol=None):
    sched.meta.setdefault("op", op)
    sched.meta.setdefault("algorithm", algorithm)
    sched.meta.setdefault("bytes", nbytes if op != "all_to_all_v"
                          else int(nbytes.sum(axis=1).max()))  # the largest send buffer
    sched.meta.setdefault("n_ranks", len(ranks))
    sched.meta["network_detail_used"] = detail
    if protocol is not None:
        sched.meta.setdefault("protocol", protocol)
    return sched


def _collective_scalable(collectives, spec, op, algorithm, ranks, nbytes, opts, where,
                         topology=None, routing=None):
    """The collective in stream form when ``network_detail`` allows it and the algorithm has
    one (ring all-reduce, reduce-scatter, all-gather, one ring per rail on whole two_tier
    nodes; hierarchical and torus all-reduce with one chunk, as phases of streams); None for
    the full schedule, which is then checked against the memory there is before it is
    built. A stream form in which a ring's own connections share a link (``routing``, a
    Routing, default the scenario's: netcosim/stream_sharing.py) is not exact: the full form
    runs instead when it fits, else the stream runs and its meta says so
    (``stream_shared_links``). Neither are phases of streams whose rings end at different
    instants at different ranks (stream_sharing.phase_drift): the same two outcomes."""
    from collectives import protocols, rail
    from netcosim.memory_guard import check_transfers, collective_transfers

    detail = network_detail(spec, where)
    try:
        op_c, algo = collectives.resolve(op, algorithm)
    except InputError as e:
        raise _in(e, where) from None
    chunks = opts.get("chunks")
    costs = protocols.costs(opts.get("protocol"), opts.get("step_latency_s"), topology, algo)
    r = np.asarray(ranks, dtype=np.int64)
    stream, phases = _stream_form(op, op_c, algo, ranks, nbytes, opts, where, topology,
                                  costs) if detail == "auto" else (None, None)

    shared = 0
    if stream is not None:
        from netcore.flow.member_routing import MemberPathMemo
        from netcosim.stream_sharing import (PHASE_DRIFT, STEP_RTOL, phase_drift,
                                             phases_in_step, self_shared_links)

        routing = routing if routing is not None else scenario_routing()
        memo = MemberPathMemo(routing) if routing is not None else None  # routed once
        # the rings of a hierarchical or torus phase are checked together, a ring stream
        # (or a rail's ring) on its own
        shared = self_shared_links(stream, routing, by_phase=phases is not None, memo=memo)
        if not shared and phases is not None and routing is not None and \
                not phases_in_step(phases, r, routing, STEP_RTOL, memo=memo):
            # phases whose rings may end at different instants at different ranks: the full
            # form starts the next phase rank by rank, the stream ring by ring (ranks out of
            # fabric order on two_tier: -10.4% to +8.3%; netcosim/stream_sharing.py). The
            # replay costs about the full form's transfers in array steps; only orders whose
            # connections differ pay it (fabric order is in step), and past the full form's
            # budget it still runs, so that summary.json can say the stream is off
            drift, shared = phase_drift(phases, r, routing, memo=memo)
            if abs(drift) > PHASE_DRIFT and not shared:
                shared = 1  # no link shared, but the order alone changes the time
        if not shared:
            return stream
    # the full form's transfers and delays (counted, not built)
    side = rail.side_by_side(topology, op_c, algo, r)  # rings (tree pairs) per rail
    if chunks is None and op != "all_to_all_v":
        chunks = protocols.chunks_for(op_c, algo, nbytes, len(ranks), opts.get("protocol"),
                                      opts.get("group_size"), side)
    count = collective_transfers(op_c, algo, len(ranks), chunks, opts.get("dims"),
                                 opts.get("group_size"), _pairs(opts),
                                 opts.get("leader")) * side
    # a step-latency delay before every transfer, a throughput-cap delay after it (LL)
    delays = count * (int(costs.any_latency) + int(costs.rate_cap(r) > 0))
    if stream is not None and count + delays > FULL_INSTEAD_MAX_NODES:
        stream.meta["stream_shared_links"] = shared  # the full form costs too much: say so
        return stream
    try:
        check_transfers(count, where, f"{op} {algo} over {len(ranks):,} ranks",
                        guard_hint(op_c, algo, detail, len(ranks), opts, where, spec,
                                    chunks, opts.get("group_size") or
                                    fabric_group(topology, r)), delays)
    except InputError:
        if stream is None:
            raise
        stream.meta["stream_shared_links"] = shared  # the full form does not fit: say so
        return stream
    return None


# The largest full schedule (transfers and delays) run instead of a stream form whose rings
# share links (_collective_scalable): about a second of the flow engine. Past it the stream
# runs, and summary.json says its rings share links (an upper bound on their time).
FULL_INSTEAD_MAX_NODES = 1 << 20


def _stream_form(op, op_c, algo, ranks, nbytes, opts, where, topology, costs):
    """The stream form of the collective (one stream per ring, or phases of them), or None
    when it has none (see _collective_scalable), and the phases (collectives.streams.Phase)
    of a hierarchical or torus all-reduce, else None."""
    from collectives import protocols, rail
    from collectives.streams import (RING_STREAMS, composed_phases, phased_schedule,
                                     ring_stream, stream_schedule)

    chunks = opts.get("chunks")
    r = np.asarray(ranks, dtype=np.int64)
    cap = costs.rate_cap(r)
    if op != "all_to_all_v" and set(opts) <= {"chunks", "step_latency_s", "protocol"}:
        rails = rail.rail_rings(topology, r) if (op_c, algo) in RING_STREAMS else None
        if rails is not None:  # one ring per rail, each its own stream (one chunk only)
            if (chunks or 1) > 1:
                return None, None
            hops = (r[rails].ravel(), r[np.roll(rails, -1, axis=1)].ravel())
            per_step = float(costs.mean_latency(*hops)) if costs.any_latency else 0.0
            return rail.stream_schedule(
                r, rails, op_c, nbytes, per_step, (costs.num, costs.den), costs.launch_s,
                costs.rate_cap(r, protocols.channels(algo, len(r), len(rails)))), None
        # the ring's connections' mean, as the builder prices a ring's steps
        # (collectives._ring.ring_step_latency)
        per_step = float(costs.mean_latency(r, np.roll(r, -1))) if costs.any_latency \
            else 0.0
        try:
            st = ring_stream(op_c, algo, len(ranks), nbytes, chunks or 1, per_step,
                             (costs.num, costs.den), costs.launch_s, cap)
        except InputError as e:
            raise _in(e, where) from None
        if st is not None:
            return stream_schedule(ranks, st, op_c), None
    if op_c == "all_reduce" and chunks in (None, 1) and \
            set(opts) <= {"chunks", "step_latency_s", "protocol", "group_size", "dims"}:
        # one chunk (these algorithms' default): a rank sends its whole phase before the
        # next, so the phases run in sequence, each as concurrent ring streams; with more
        # chunks the phases pipeline and the full form runs
        phases = composed_phases(algo, r, nbytes, costs, opts.get("group_size"),
                                 opts.get("dims"))
        if phases is not None:
            sched = phased_schedule(ranks, phases, op_c)
            sched.meta["phased"] = True
            for key in ("group_size", "dims"):
                if opts.get(key) is not None:
                    sched.meta[key] = opts[key]
            return sched, phases
    return None, None


def _pairs(opts: dict):
    """A send_recv's pairs option if it is a list (the builder checks it), else None."""
    p = opts.get("pairs")
    return p if isinstance(p, (list, tuple)) else None


def _in(e: InputError, where: str) -> InputError:
    """The collectives library's error inside [workload]: its "op = ..." / "algorithm = ..."
    become ``workload.op = ...`` / ``workload.algorithm = ...``."""
    msg = str(e)
    if msg.startswith(where):
        return InputError(msg)
    if msg.startswith(("op = ", "algorithm = ", "protocol = ", "chunks = ")):
        return InputError(f"{where}.{msg}")
    return InputError(f"{where}: {msg}")


def _option_named(e: InputError, where: str, given: dict, filled: set) -> InputError:
    """An algorithm option the library refused ("workload: dims = [] ...") named as the
    user's field: ``workload.options.dims``, or, when the user gave none, said so (the
    value was the fabric's or the algorithm's default)."""
    msg = str(e)
    m = re.match(re.escape(where) + r": (\w+) = ", msg)
    if type(e) is not InputError or not m or \
            m.group(1) in ("op", "algorithm", "protocol", "chunks", "bytes", "ranks"):
        return e  # (a subclass, e.g. the memory guard's refusal, keeps its type)
    key, rest = m.group(1), msg[len(where) + 2:]
    if key in given:
        return InputError(f"{where}.options.{rest}")
    source = "the one taken from the fabric" if key in filled else "the algorithm's default"
    return InputError(f"{where}.options.{key}: not given, and {source}, {rest}")


def _bytes_matrix(spec: dict, n: int, field: str) -> np.ndarray:
    """``bytes_matrix``: n x n sizes (row i: bytes rank i sends to each rank; the diagonal
    stays local), each an integer or a size string."""
    if field.rsplit(".", 1)[-1] not in spec:
        raise InputError(f"{field}: missing (an {n} x {n} array, row i = bytes rank i sends "
                         f"to each rank)")
    m = spec[field.rsplit(".", 1)[-1]]
    if not isinstance(m, list) or len(m) != n:
        raise InputError(f"{field} = {short_repr(m, 80)}: expected {n} rows (one per rank), each of "
                         f"{n} sizes")
    out = np.zeros((n, n), dtype=np.int64)
    for i, row in enumerate(m):
        if not isinstance(row, list) or len(row) != n:
            raise InputError(f"{field}[{i}] = {short_repr(row, 80)}: expected {n} sizes (one per rank)")
        for j, v in enumerate(row):
            out[i, j] = parse_bytes(v, f"{field}[{i}][{j}]")
    off = ~np.eye(n, dtype=bool)
    if not out[off].any():
        raise InputError(f"{field}: moves no bytes between ranks (every off-diagonal entry "
                         f"is 0)")
    _check_row_sums(out, m, field)
    return out


def _check_row_sums(sizes: np.ndarray, rows: list, field: str) -> None:
    """Each row's total (all it holds, the diagonal too) within int64, as the collectives
    library needs it (collectives/all_to_all.py, _row_max): checked here, where the row has
    its scenario name (``rows``: as written), instead of the library's ``nbytes[i]``. int64
    sums would wrap: float64 sums find the rows near the limit (vectorised), and those are
    summed exactly in Python integers."""
    from netcore.sizes import MAX_BYTES

    near = np.flatnonzero(sizes.sum(axis=1, dtype=np.float64) > MAX_BYTES * 0.999)
    for i in near.tolist():
        total = sum(int(x) for x in sizes[i])
        if total > MAX_BYTES:
            raise InputError(f"{field}[{i}] = {short_repr(rows[i], 80)}: rank {i} sends "
                             f"{total:,} bytes in all, beyond the {MAX_BYTES:,} an int64 "
                             f"holds")




def _chosen(choice):
    """(algorithm, rank order or None, options or None) from collectives.choose, which may
    return the name, a (name, ...) tuple, or an object/dict with ``algorithm`` and optionally
    ``ranks`` and ``options``."""
    if isinstance(choice, str):
        return choice, None, None
    if isinstance(choice, (tuple, list)) and choice and isinstance(choice[0], str):
        return choice[0], None, None
    get = choice.get if isinstance(choice, dict) else lambda k: getattr(choice, k, None)
    if isinstance(get("algorithm"), str):
        return get("algorithm"), get("ranks"), get("options")
    raise TypeError(f"collectives.choose returned {choice!r}")


def _fabric_defaults(collectives, op, algorithm, topology, ranks, opts, where) -> None:
    """Fill the options an algorithm needs from the fabric when the user left them out:
    ``dims`` of a torus (when the ranks are all hosts in id order) and ``group_size`` of a
    hierarchical algorithm (when the ranks come in equal runs of one ``host_group`` each, e.g.
    the GPUs of a node on two_tier)."""
    import inspect

    if not hasattr(collectives, "resolve") or not hasattr(collectives, "ALGORITHMS"):
        return
    try:
        op, algorithm = collectives.resolve(op, algorithm)
    except InputError as e:
        raise _in(e, where) from None
    params = inspect.signature(collectives.ALGORITHMS[op][algorithm]).parameters
    if ("dims" in params and "dims" not in opts and "dims" in topology.params
            and ranks == list(range(topology.n_hosts))):
        opts["dims"] = tuple(int(d) for d in topology.params["dims"])
    if "group_size" in params and "group_size" not in opts and ranks:
        g = fabric_group(topology, ranks)
        if g is not None:
            opts["group_size"] = g


def report_collective(spec: dict, schedule, result) -> dict:
    """NCCL-tests style figures (collectives.report) from the collective's run time."""
    from collectives.report import figures

    op = schedule.meta.get("op", spec.get("op"))
    nbytes = int(schedule.meta.get("bytes", 0))
    n = int(schedule.meta.get("n_ranks", 0))
    out = {"op": op, "algorithm": schedule.meta.get("algorithm"),
           "protocol": schedule.meta.get("protocol"), "ranks": n,
           "message_bytes": nbytes, "algbw_GBps": None, "busbw_GBps": None}
    t = result.makespan
    # a collective some of whose transfers never finished (a deadlock, a cut with no path left)
    # has no completion time: no bandwidth figure rather than one from the part that ran
    if t > 0 and n >= 1 and result.finished.all():
        fig = figures(op, n, nbytes, t)
        out["algbw_GBps"], out["busbw_GBps"] = fig["algbw_GBps"], fig["busbw_GBps"]
    return out


register_workload("flows", build_flows, ("flows",))
register_workload("collective", build_collective, COLLECTIVE_KEYS, report_collective)
