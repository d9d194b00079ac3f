"""Scenario files: load TOML/JSON, apply ``--set`` overrides, validate, build the run's parts.

The structure is the contract in DESIGN.md (name, seed, [topology], [routing], [engine],
[[faults]], [workload]); docs/scenarios.md is the user reference. Loading is strict: an
unknown key at any level is an error, and every error is an ``InputError`` whose message names
the field (as a dotted path) and the value.

This module checks the *shape* of a scenario (which keys exist, which are tables, lists,
strings) and hands every value to the component that owns it: topology parameters to
``topo.builders.build``, the routing policy to ``topo.routing.Routing``, faults to
``LinkFaults.from_records``, engine options to the engine's ``options.check_options`` and the
workload to its registered builder (netcosim.workloads). It never re-implements their checks.
"""
from __future__ import annotations

import difflib
import importlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from netcosim import memory_guard
from netcosim.units import is_int, short_repr
from topo.errors import InputError, is_finite
from topo.arrays import unique

TOP_KEYS = ("name", "description", "seed", "topology", "routing", "engine", "faults", "workload")
# top-level tables of study files (docs/sweeps.md), and the command that reads each
_STUDY_KEYS = {
    "sweep": ("sweep", "`netcosim sweep FILE` runs (`--dry-run` checks every point)"),
    "plot": ("sweep", "`netcosim sweep FILE` runs (`--dry-run` checks every point)"),
    "faults_study": ("fault-study", "`netcosim faults FILE` runs"),
}
ROUTING_KEYS = ("policy",)
FAULT_KEYS = ("link", "kind", "at_us", "factor", "direction")
ENGINES = ("flow", "packet")
DEFAULT_POLICY = "ecmp"
DEFAULT_ENGINE = "flow"
MAX_SEED = 2**63 - 1


# =========================================================================== reading files
def read_file(path) -> dict:
    """The raw table in a .toml or .json file (no validation beyond the syntax)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"scenario file {str(path)!r} does not exist")
    if p.is_dir():
        raise InputError(f"scenario file {str(path)!r} is a directory")
    suffix = p.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise InputError(f"scenario file {str(path)!r}: expected a .toml or .json file")
    # what the parsed file and the transfers it holds will take, before reading and before
    # parsing it (netcosim/memory_guard.py): a 10^7-flow file parses into gigabytes of tables
    try:
        memory_guard.check_file(path, p.stat().st_size)
        raw = p.read_bytes()
    except OSError as e:
        raise InputError(f"scenario file {str(path)!r}: cannot be read ({e.strerror})") from None
    memory_guard.check_file(path, len(raw), raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"scenario file {str(path)!r}: not UTF-8 text (byte {e.start})") from None
    if suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"scenario file {str(path)!r}: malformed TOML: {e}") from None
        except RecursionError:
            raise InputError(f"scenario file {str(path)!r}: nested too deeply (more than "
                             f"{MAX_DEPTH} levels of tables and arrays)") from None
        check_depth(data, f"scenario file {str(path)!r}")
        return data
    return parse_json(text, str(path))


MAX_DEPTH = 64  # levels of tables/arrays in a scenario: far beyond any real one


def check_depth(value, where: str) -> None:
    """Refuse tables/arrays nested more than MAX_DEPTH deep (later steps copy and walk the
    table recursively); iterative, so any depth is safe to check. Level by level, and a
    container holding no container is passed over at C speed: a 3,000,000-link custom fabric
    is 9,000,000 values, which a walk value by value took 7 s over."""
    level, depth = ([value] if type(value) in _CONTAINERS else []), 0
    while level:
        nxt = []
        for v in level:
            items = v.values() if type(v) is dict else v
            if not _CONTAINERS.isdisjoint(map(type, items)):
                nxt.extend(x for x in items if type(x) in _CONTAINERS)
        level = nxt
        depth += 1
        if level and depth >= MAX_DEPTH:
            raise InputError(f"{where}: nested too deeply (more than {MAX_DEPTH} levels of "
                             f"tables and arrays)")


_CONTAINERS = frozenset((dict, list))


def parse_json(text: str, where: str = "<json>") -> dict:
    def no_duplicates(pairs):
        d = dict(pairs)  # at C speed: called once per object (10^7 times for 10^7 flows)
        if len(d) != len(pairs):
            seen = set()
            k = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise InputError(f"scenario file {where!r}: key {k!r} appears twice")
        return d

    def no_constant(name):  # NaN / Infinity are not JSON, and no scenario value may be one
        raise InputError(f"scenario file {where!r}: {name} is not a valid value")

    try:
        data = json.loads(text, object_pairs_hook=no_duplicates, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        raise InputError(f"scenario file {where!r}: malformed JSON: {e.msg} at line {e.lineno} "
                         f"column {e.colno}") from None
    except RecursionError:
        raise InputError(f"scenario file {where!r}: nested too deeply") from None
    check_depth(data, f"scenario file {where!r}")
    if not isinstance(data, dict):
        raise InputError(f"scenario file {where!r}: the top level must be an object (a table), "
                         f"not {_type_name(data)}")
    return data


# =========================================================================== --set overrides
_BARE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-.:/+]*$")


def parse_override(text: str) -> tuple[list, object]:
    """``"topology.k=8"`` -> (["topology", "k"], 8).

    The value is a TOML literal (``8``, ``0.5``, ``"256MiB"``, ``[1, 2]``, ``true``); a bare word
    that is not valid TOML (``packet``, ``256MiB``) is taken as a string so the common case needs
    no shell quoting. Path segments that are integers index arrays (``faults.0.at_us``).
    """
    if not isinstance(text, str) or "=" not in text:
        raise InputError(f"--set {text!r}: expected key=value, e.g. --set topology.k=8")
    key, _, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    path = key.split(".")
    if not key or any(not seg.strip() for seg in path):
        raise InputError(f"--set {text!r}: {key!r} is not a dotted key such as topology.k")
    path = [int(seg) if seg.strip().isdigit() else seg.strip() for seg in path]
    if isinstance(path[0], int):
        raise InputError(f"--set {text!r}: a key cannot start with an index")
    if raw == "":
        raise InputError(f"--set {text!r}: no value after '='")
    if len(path) > MAX_DEPTH:
        raise InputError(f"--set {short_repr(text)}: more than {MAX_DEPTH} keys")
    try:
        parsed = tomllib.loads(f"v = {raw}")
        if set(parsed) != {"v"}:  # "1\nx = 2" smuggles in another key
            raise tomllib.TOMLDecodeError("more than one value")
        value = parsed["v"]
    except RecursionError:
        raise InputError(f"--set {short_repr(text)}: the value is nested too deeply") from None
    except tomllib.TOMLDecodeError:
        if not _BARE.match(raw):
            raise InputError(f"--set {text!r}: {raw!r} is not a TOML value (quote strings: "
                             f"key='\"text\"')") from None
        value = raw
    check_depth(value, f"--set {short_repr(text)}")
    return path, value


def apply_override(data: dict, path: list, value, text: str | None = None) -> None:
    """Set ``data[path[0]][path[1]]... = value`` in place, creating missing tables.

    Unknown keys are not refused here: the strict validation that follows names them.
    """
    label = text if text is not None else ".".join(map(str, path)) + "=..."
    node = data
    for depth, seg in enumerate(path[:-1]):
        here = ".".join(map(str, path[: depth + 1]))
        if isinstance(node, dict):
            if isinstance(seg, int):
                raise InputError(f"--set {label}: {_dotted(path[:depth]) or 'the scenario'} is "
                                 f"a table, not an array; {seg} is not a key")
            if seg not in node:
                node[seg] = {}
            node = node[seg]
        elif isinstance(node, list):
            if not isinstance(seg, int) or seg >= len(node):
                raise InputError(f"--set {label}: {_dotted(path[:depth])} has {len(node)} "
                                 f"entries; {seg!r} is not an index of it")
            node = node[seg]
        else:
            raise InputError(f"--set {label}: {_dotted(path[:depth])} is {_type_name(node)}, "
                             f"not a table, so {here} cannot be set")
    last = path[-1]
    if isinstance(node, dict):
        if isinstance(last, int):
            raise InputError(f"--set {label}: {_dotted(path[:-1])} is a table, not an array")
        node[last] = value
    elif isinstance(node, list):
        if not isinstance(last, int) or last >= len(node):
            raise InputError(f"--set {label}: {_dotted(path[:-1])} has {len(node)} entries; "
                             f"{last!r} is not an index of it")
        node[last] = value
    else:
        raise InputError(f"--set {label}: {_dotted(path[:-1])} is {_type_name(node)}, not a "
                         f"table, so {_dotted(path)} cannot be set")


def _dotted(path) -> str:
    return ".".join(map(str, path))


# =========================================================================== the Scenario
@dataclass
class Scenario:
    """A scenario whose shape has been checked; values are checked when parts are built."""

    name: str
    seed: int
    topology: dict  # {"kind": ..., builder params ...}
    routing: dict  # {"policy": ...}
    engine: dict  # {"kind": "flow"|"packet", engine options ...}
    faults: list  # [{"link": [u, v], "kind": ..., ...}]
    workload: dict | None  # {"kind": ..., ...}
    description: str = ""
    source: str | None = None
    data: dict = field(default_factory=dict)  # the (overridden) table it was made from

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: dict, source: str | None = None,
                  default_name: str = "scenario") -> "Scenario":
        if not isinstance(data, dict):
            raise InputError(f"scenario: expected a table, got {_type_name(data)}")
        for key, cmd in _STUDY_KEYS.items():  # a study file given to run/validate: say which
            # command takes it (it was "sweep: unknown key 'sweep' ...; did you mean 'seed'?")
            if key in data:
                raise InputError(f"{key}: {source or 'this file'} is a {cmd[0]} file, which "
                                 f"{cmd[1]}; this command takes one scenario without a "
                                 f"[{key}] table")
        _check_keys(data, TOP_KEYS, "")
        name = data.get("name", default_name)
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"name = {name!r}: expected a non-empty string")
        description = data.get("description", "")
        if not isinstance(description, str):
            raise InputError(f"description = {description!r}: expected a string")
        seed = data.get("seed", 0)
        if not is_int(seed) or not 0 <= seed <= MAX_SEED:
            # the bound too: 2**63 was told "expected >= 0"
            raise InputError(f"seed = {seed!r}: expected an integer from 0 to {MAX_SEED} "
                             f"(2^63-1)")

        if "topology" not in data:
            raise InputError("topology: missing; a scenario needs a [topology] table with a kind")
        topology = _table(data["topology"], "topology")
        _kind(topology, "topology", required=True)

        routing = _table(data.get("routing", {}), "routing")
        _check_keys(routing, ROUTING_KEYS, "routing")
        policy = routing.get("policy", DEFAULT_POLICY)
        if not isinstance(policy, str):
            raise InputError(f"routing.policy = {policy!r}: expected a policy name (a string)")
        routing = {**routing, "policy": policy}

        engine = _table(data.get("engine", {}), "engine")
        ekind = engine.get("kind", DEFAULT_ENGINE)
        if ekind not in ENGINES:
            raise InputError(f"engine.kind = {ekind!r}: expected one of {', '.join(ENGINES)}")
        engine = {**engine, "kind": ekind}

        faults = data.get("faults", [])
        if not isinstance(faults, list):
            raise InputError(f"faults = {short_repr(faults)}: expected an array of tables "
                             f"([[faults]] in TOML)")
        for i, rec in enumerate(faults):
            _table(rec, f"faults[{i}]")
            _check_keys(rec, FAULT_KEYS, f"faults[{i}]")

        workload = None
        if "workload" in data:
            from netcosim import workloads

            workload = _table(data["workload"], "workload")
            workloads.check_keys(workload, "workload")

        return cls(name=name, seed=seed, topology=topology, routing=routing, engine=engine,
                   faults=faults, workload=workload, description=description, source=source,
                   data=data)

    # ------------------------------------------------------------------ parts
    @property
    def policy(self) -> str:
        return self.routing["policy"]

    @property
    def engine_kind(self) -> str:
        return self.engine["kind"]

    def with_engine(self, kind: str) -> "Scenario":
        """The same scenario on another engine (``--engine``)."""
        data = dict(self.data)
        data["engine"] = {**self.engine, "kind": kind}
        return Scenario.from_dict(data, self.source, self.name)

    def with_full_detail(self) -> "Scenario":
        """The same scenario with every transfer generated (``network_detail = "full"``), for
        consumers that need each point-to-point transfer: ns-3, Chakra export."""
        if not isinstance(self.workload, dict) or "network_detail" not in \
                _workload_keys(self.workload):
            return self
        data = dict(self.data)
        data["workload"] = {**self.workload, "network_detail": "full"}
        return Scenario.from_dict(data, self.source, self.name)

    def build_topology(self):
        params = {k: v for k, v in self.topology.items() if k != "kind"}
        return _build_topology(self.topology["kind"], params)

    def build_routing(self, topology):
        from topo import routing as routing_mod

        policy = self.policy
        if policy not in routing_mod.POLICIES:
            raise InputError(f"routing.policy = {policy!r}: expected one of "
                             f"{', '.join(routing_mod.POLICIES)}")
        try:
            routing = routing_mod.Routing(topology, policy, seed=self.seed)
        except InputError as e:
            raise _prefixed(e, "routing", f"routing.policy = {policy!r}") from None
        from netcosim.routing_notice import warn_planes

        warn_planes(topology, policy, self.engine_kind,
                    self.engine.get("warm_connections") is True)
        return routing

    def build_faults(self, topology):
        from topo.faults import LinkFaults

        from netcosim.units import records_with_times

        return LinkFaults.from_records(topology, records_with_times(self.faults, "at_us", "faults"),
                                       field_name="faults")

    def build_schedule(self, topology, faults=None, routing=None):
        from netcosim import workloads

        if self.workload is None:
            raise InputError("workload: missing; add a [workload] table (kind = \"collective\", "
                             "\"flows\", ...)")
        base = Path(self.source).resolve().parent if self.source else None
        return workloads.build_workload(topology, self.workload, where="workload",
                                        seed=self.seed, base_dir=base, faults=faults,
                                        engine=self.engine_kind, routing=routing)

    def engine_options(self) -> dict:
        """The engine's options, checked and completed with defaults by the engine itself."""
        mod = engine_options_module(self.engine_kind)
        opts = {k: v for k, v in self.engine.items() if k != "kind"}
        return mod.check_options(opts)

    # ------------------------------------------------------------------ everything
    def prepare(self, check_engine: bool = True, check_reachability: bool = True) -> "Prepared":
        """Build every part and run every check `validate` and `run` make before simulating.

        With ``check_engine`` false, an engine missing from this build is tolerated (options
        are then unchecked: ``engine_options`` is None). With ``check_reachability`` false,
        transfers between hosts that faults cut apart are left for the engine to report as
        stranded (a fault study wants those runs) instead of being refused.
        """
        topology = self.build_topology()
        routing = self.build_routing(topology)
        faults = self.build_faults(topology)
        schedule = self.build_schedule(topology, faults, routing)
        if check_reachability:
            check_reachable(topology, routing, faults, schedule, self.engine_kind)
        # Last: a file with errors is reported as such even when the engine is missing.
        try:
            options = self.engine_options()
        except EngineMissing:
            if check_engine:
                raise
            options = None
        if options is not None and self.engine_kind == "packet":
            self._check_packet_limits(topology, schedule, faults, options)
        elif self.engine_kind == "flow":
            self._check_flow_clock(schedule)
        return Prepared(self, topology, routing, faults, schedule, self.engine_kind, options)

    def _check_packet_limits(self, topology, schedule, faults, options) -> None:
        """The packet engine's integer ranges (netcore.packet.limits), refused with the
        scenario field the offending time or size came from."""
        from netcore.packet import limits

        try:
            limits.check(topology, schedule, faults, options)
        except limits.PacketLimit as e:
            raise InputError(_limit_message(e, self, schedule)) from None


    def _check_flow_clock(self, schedule) -> None:
        """The flow engine's clock range (netcore.flow.limits), refused with the scenario
        field the offending time came from."""
        from netcore.flow import limits
        from netcore.packet.limits import PacketLimit

        try:
            limits.check(schedule)
        except PacketLimit as e:
            raise InputError(_limit_message(e, self, schedule)) from None


@dataclass
class Prepared:
    scenario: Scenario
    topology: object
    routing: object
    faults: object
    schedule: object
    engine: str
    engine_options: dict | None


def load_scenario(path, overrides=(), engine: str | None = None) -> Scenario:
    """Read, override (``--set`` strings, in order), and shape-check a scenario file."""
    data = read_file(path)
    for text in overrides:
        keys, value = parse_override(text)
        apply_override(data, keys, value, text)
    if engine is not None:
        if engine not in ENGINES:
            raise InputError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}")
        eng = data.get("engine", {})
        data["engine"] = {**eng, "kind": engine} if isinstance(eng, dict) else eng
    return Scenario.from_dict(data, source=str(path), default_name=Path(path).stem)


# =========================================================================== delegation
class EngineMissing(InputError):
    """The scenario's engine is not part of this build."""


def engine_options_module(kind: str):
    name = f"netcore.{kind}.options"
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and name.startswith(e.name):
            raise EngineMissing(f"engine.kind = {kind!r}: engine {kind!r} is not available in "
                                f"this build") from None
        raise


def _build_topology(kind, params: dict):
    from topo import builders

    return builders.build(kind, params, where="topology")


def check_reachable(topology, routing, faults, schedule, engine: str = "flow") -> None:
    """Refuse a transfer between hosts that can never reach each other.

    "Never" means over the links that are down at time 0 and stay down for the whole run (no
    later ``up`` or ``degrade`` revives them). A pair that only loses its paths because of a
    later fault is not an input error: the engine reports those transfers as stranded.
    The packet engine's connections also send back to their source (ACKs, CNPs): along the
    path backwards, so over links alive both ways (``two_way``), or for a per-packet policy
    (spray, adaptive) on a route of their own, so the pair must reach both ways.
    """
    from netcore.schedule import TRANSFER

    t = np.flatnonzero(schedule.kind == TRANSFER)
    if t.size == 0:
        return
    n = topology.n_dlinks
    alive = faults.alive_at(n, 0.0) if len(faults) else np.ones(n, dtype=bool)
    if len(faults):
        later = (faults.time > 0) & (faults.factor > 0)
        alive[faults.dlink[later]] = True
    per_hop = routing_policy_name(routing) in ("spray", "adaptive")
    both_ways = engine == "packet"
    one_way = alive
    if both_ways and not per_hop:
        from netcore.packet.engine import two_way

        alive = two_way(alive)
    if alive.all() and topology.hosts_forward:
        # a built fabric is connected (Topology checks it), its links carry both ways and
        # every node forwards: every pair is reachable
        return
    src = schedule.src[t].astype(np.int64)
    dst = schedule.dst[t].astype(np.int64)
    key = src * topology.n_nodes + dst
    pairs, first = np.unique(key, return_index=True)
    ps, pd = src[first], dst[first]
    reach = _reachable(routing, ps, pd, alive)
    if both_ways and per_hop:  # the ACKs' own route back
        reach &= _reachable(routing, pd, ps, alive)
    if reach.all():
        return
    j = int(np.flatnonzero(~reach)[0])
    node = int(t[first[j]])
    where = schedule.meta.get("node_field")
    who = f"{where}[{node}]" if where else f"workload: transfer {node}"
    down = "" if alive.all() else (" with the links that are down from time 0 (`netcosim run "
                                   "--allow-stranded` runs it and reports such transfers as "
                                   "stranded)")
    back = ""
    if both_ways and _reachable(routing, ps[j:j + 1], pd[j:j + 1], one_way)[0]:
        back = (" and back (the packet engine's connections send ACKs to their source, " +
                ("each on its own route" if per_hop else "along the path backwards, so a "
                 "path needs its links alive both ways") + ")")
    raise InputError(f"{who}: host {int(ps[j])} cannot reach host {int(pd[j])}{back}{down} "
                     f"(routing.policy = {routing_policy_name(routing)!r})")


def _reachable(routing, src, dst, alive) -> np.ndarray:
    """Per pair, whether ``src`` reaches ``dst`` over the ``alive`` links."""
    if routing.topology.hosts_forward:
        return _reachable_by_distance(routing, src, dst, alive)
    paths = routing.paths(src, dst, alive=None if alive.all() else alive)
    return np.asarray(paths.reachable, dtype=bool)


def _reachable_by_distance(routing, src, dst, alive) -> np.ndarray:
    """Per pair, whether ``src`` reaches ``dst`` over the ``alive`` links, from the routing's
    distance rows: what its paths would say, without walking them (on a long chain a path is
    millions of links). Rows are taken a cache's worth at a time; the routing keeps the last
    ones for the run."""
    n = routing.topology.n_nodes
    uniq = unique(dst)
    step = max(1, routing.cache_bytes // (4 * n))
    mask = None if alive.all() else alive
    reach = np.zeros(len(src), dtype=bool)
    for c in range(0, len(uniq), step):
        chunk = uniq[c:c + step]
        rows = routing.distances(chunk, alive=mask)
        pick = np.flatnonzero((dst >= chunk[0]) & (dst <= chunk[-1]))
        reach[pick] = rows[np.searchsorted(chunk, dst[pick]), src[pick]] >= 0
    return reach


def _limit_message(e, scenario, schedule) -> str:
    """An engine's range error (netcore.packet.limits.PacketLimit, also raised by
    netcore.flow.limits) in scenario terms."""
    from netcore.packet.limits import TIME_LIMIT_US

    msg = str(e)
    if e.fault is not None:  # the first record at or past the clock's end
        from netcosim.units import records_with_times

        # times with a unit ("5e7s") parsed to us to find the record; shown as written
        for i, rec in enumerate(records_with_times(scenario.faults, "at_us", "faults")):
            at = rec.get("at_us", 0.0) if isinstance(rec, dict) else 0.0
            if is_finite_number(at) and at >= TIME_LIMIT_US:
                return f"faults[{i}].at_us = {short_repr(scenario.faults[i]['at_us'])}: {msg}"
        return f"faults: {msg}"
    if e.node is not None:
        i = e.node
        rest = re.sub(r"^node \d+: ", "", msg)
        field = schedule.meta.get("node_field")
        if field and e.what in ("start", "bytes"):
            key = "start_us" if e.what == "start" else "bytes"
            # the value as written: the schedule's start is in seconds, and 1e308 us read
            # back from it is 9.999999999999998e+307
            written = _written(scenario, field, i, key)
            value = (short_repr(written) if written is not None
                     else f"{float(schedule.start[i]) * 1e6:.15g}" if e.what == "start"
                     else f"{int(schedule.size[i])}")
            return f"{field}[{i}].{key} = {value}: {rest}"
        wl = scenario.workload or {}
        who = (f"transfer {i} (host {int(schedule.src[i])} -> host {int(schedule.dst[i])})"
               if e.what == "bytes" else f"node {i}")
        if e.what == "bytes" and "bytes" in wl:
            return f"workload.bytes = {short_repr(wl['bytes'])}: {who}: {rest}"
        if e.what == "duration" and wl.get("gpu_faults"):  # a slowed GPU's compute time
            return f"workload.gpu_faults = {short_repr(wl['gpu_faults'])}: {who}: {rest}"
        if e.what == "duration" and not field and isinstance(wl.get("gpu"), dict) and \
                wl.get("kind") == "training":  # a compute time from figures given here
            return (f"workload.gpu = {short_repr(wl['gpu'])}: {who} (a compute time priced "
                    f"with these figures): {rest}")
        return f"{field}[{i}]: {rest}" if field else f"workload: {who}: {rest}"
    if e.option is not None:
        return msg
    if e.what == "link":
        return f"topology: {msg}"
    wl = scenario.workload or {}
    if e.what == "events" and "bytes" in wl:  # a collective's size: the one field to change
        return f"workload.bytes = {short_repr(wl['bytes'])}: {msg}"
    return f"engine.kind = 'packet': {msg}"


def _written(scenario, field: str, i: int, key: str):
    """What the scenario (after --set) holds at ``field[i].key`` (``field`` dotted, e.g.
    "workload.flows"), or None."""
    node = scenario.data
    for part in field.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    rec = node[i] if isinstance(node, list) and 0 <= i < len(node) else None
    return rec.get(key) if isinstance(rec, dict) else None


def routing_policy_name(routing) -> str:
    return str(getattr(routing, "policy", "?"))


# =========================================================================== small checks
def _type_name(v) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def _table(v, where: str) -> dict:
    if not isinstance(v, dict):
        raise InputError(f"{where} = {short_repr(v)}: expected a table, got {_type_name(v)}")
    return v


def _kind(table: dict, where: str, required: bool) -> None:
    if "kind" not in table:
        if required:
            raise InputError(f"{where}.kind: missing")
        return
    if not isinstance(table["kind"], str):
        raise InputError(f"{where}.kind = {short_repr(table['kind'])}: expected a string")


def _check_keys(table: dict, allowed, where: str) -> None:
    for key in table:
        if key not in allowed:
            full = f"{where}.{key}" if where else str(key)
            hint = difflib.get_close_matches(str(key), list(allowed), n=1)
            also = f"; did you mean {hint[0]!r}?" if hint else ""
            raise InputError(f"{full}: unknown key {str(key)!r} (allowed here: "
                             f"{', '.join(allowed)}){also}")


def check_keys(table: dict, allowed, where: str) -> None:
    """Public form of the strict key check, for workload builders and plugins."""
    _check_keys(table, allowed, where)


def _prefixed(e: InputError, prefix: str, label: str) -> InputError:
    msg = str(e)
    if msg.startswith(prefix):
        return InputError(msg)
    return InputError(f"{label}: {msg}")


def is_finite_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and is_finite(v)


def _workload_keys(spec: dict) -> frozenset:
    from netcosim import workloads

    try:
        return workloads.get(spec.get("kind")).keys
    except InputError:
        return frozenset()
