"""Link faults as data: time-stamped events on directed links, and a seeded sampler.

A fault is ``down`` (the link carries nothing), ``degrade`` (capacity becomes ``factor`` times
the nominal bandwidth) or ``up`` (back to nominal). Events are sorted by (time, order given),
so two events at the same instant apply in the order the user wrote them. Routing avoids links
that are down when it chooses a path; what happens to traffic in flight is the engine's job.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from topo.errors import InputError, is_finite
from topo.topology import Topology, TopologyError

DOWN = 0
DEGRADE = 1
UP = 2
FAULT_KINDS = {"down": DOWN, "degrade": DEGRADE, "up": UP}
FAULT_NAMES = {v: k for k, v in FAULT_KINDS.items()}
_RECORD_KEYS = {"link", "kind", "at_us", "factor", "direction"}
# The smallest degrade factor accepted. Below it a link carries next to nothing in any time a
# run can represent, and at denormal factors the rate itself underflows: a 1 MB transfer over
# a link degraded by 5e-324 took an infinite time in the flow engine (stranded and labelled
# "blocked", though no link was down) and ran the packet engine out of event numbers.
MIN_DEGRADE_FACTOR = 1e-9


def check_degrade_factor(factor, where: str) -> float:
    """``factor`` as a float if it is a valid degrade factor, else FaultError naming ``where``."""
    if isinstance(factor, bool) or not isinstance(factor, (int, float, np.integer, np.floating)) \
            or not (0 < factor <= 1):
        raise FaultError(f"{where} = {factor!r}: a degrade needs 0 < factor <= 1")
    if factor < MIN_DEGRADE_FACTOR:
        raise FaultError(f"{where} = {factor!r}: a degrade below {MIN_DEGRADE_FACTOR:g} of the "
                         "bandwidth carries next to nothing; use kind = \"down\"")
    return float(factor)


class FaultError(InputError):
    """A fault that names a missing link or an impossible value."""


@dataclass(eq=False)
class LinkFaults:
    time: np.ndarray  # float64 (m,) seconds, non-decreasing
    dlink: np.ndarray  # int64 (m,) directed link id
    kind: np.ndarray  # int8 (m,) DOWN / DEGRADE / UP
    factor: np.ndarray  # float64 (m,) remaining fraction of bandwidth (degrade), 0 down, 1 up

    def __post_init__(self):
        self.time = np.asarray(self.time, dtype=np.float64)
        self.dlink = np.asarray(self.dlink, dtype=np.int64)
        self.kind = np.asarray(self.kind, dtype=np.int8)
        self.factor = np.asarray(self.factor, dtype=np.float64)
        order = np.argsort(self.time, kind="stable")
        for name in ("time", "dlink", "kind", "factor"):
            setattr(self, name, np.ascontiguousarray(getattr(self, name)[order]))
        self._drop_no_ops()

    def _drop_no_ops(self) -> None:
        """Drop events that leave their link's capacity as it was (a degrade by 1.0 or an
        ``up`` of a link at nominal bandwidth, a repeated ``down``): they change nothing, but
        any event marks its link as faulted, which splits the scalable form's member sets and
        gives replicas their own compute chains (docs/scale.md, "Faults"). A sweep over
        ``factor = [1.0, 0.5, ...]`` then got a baseline that differed from the fault-free
        run (GPT/Llama steps on 16,384 GPUs: exposed pipeline time 0.42 s -> 0.26 s)."""
        m = len(self.time)
        if m == 0:
            return
        keep = np.ones(m, dtype=bool)
        now: dict[int, float] = {}
        for i, (d, f) in enumerate(zip(self.dlink.tolist(), self.factor.tolist())):
            if now.get(d, 1.0) == f:
                keep[i] = False
            now[d] = f
        if not keep.all():
            for name in ("time", "dlink", "kind", "factor"):
                setattr(self, name, np.ascontiguousarray(getattr(self, name)[keep]))

    def __len__(self):
        return len(self.time)

    @classmethod
    def none(cls) -> "LinkFaults":
        return cls(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))

    @classmethod
    def from_records(cls, topology: Topology, records: list[dict],
                     field_name: str = "faults") -> "LinkFaults":
        """Build from scenario-style dicts: ``link=[u, v]``, ``kind``, ``at_us`` (default 0),
        ``factor`` (degrade only), ``direction`` = "both" (default) or "forward" (u->v only)."""
        times, links, kinds, factors = [], [], [], []
        for i, rec in enumerate(records):
            where = f"{field_name}[{i}]"
            if not isinstance(rec, dict):
                raise FaultError(f"{where} = {rec!r}: expected a table with link, kind, at_us")
            unknown = sorted(set(rec) - _RECORD_KEYS, key=str)
            if unknown:
                raise FaultError(f"{where}.{unknown[0]} = {rec[unknown[0]]!r}: unknown key "
                                 f"(accepted: {', '.join(sorted(_RECORD_KEYS))})")
            link = rec.get("link")
            if (not isinstance(link, (list, tuple)) or len(link) != 2 or
                    not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                            for x in link)):
                raise FaultError(f"{where}.link = {link!r}: expected [u, v], two node ids")
            u, v = int(link[0]), int(link[1])
            kind = rec.get("kind", "down")
            if not isinstance(kind, str) or kind not in FAULT_KINDS:
                raise FaultError(f"{where}.kind = {kind!r}: expected one of down, degrade, up")
            at_us = rec.get("at_us", 0.0)
            if not isinstance(at_us, (int, float)) or isinstance(at_us, bool) or \
                    not is_finite(at_us) or at_us < 0:
                raise FaultError(f"{where}.at_us = {at_us!r}: expected a time >= 0")
            if kind == "degrade":
                factor = check_degrade_factor(rec.get("factor"), f"{where}.factor")
            elif "factor" in rec:
                raise FaultError(f"{where}.factor: only a degrade takes a factor (kind = {kind!r})")
            else:
                factor = 0.0 if kind == "down" else 1.0
            direction = rec.get("direction", "both")
            if not isinstance(direction, str) or direction not in ("both", "forward"):
                raise FaultError(f"{where}.direction = {direction!r}: expected both or forward")
            d = topology.dlink_id(u, v) if 0 <= u < topology.n_nodes and 0 <= v < topology.n_nodes else -1
            if d < 0:
                raise FaultError(f"{where}.link = [{u}, {v}]: there is no link between nodes "
                                 f"{u} and {v}")
            ids = [d] if direction == "forward" else [d, d ^ 1]
            for dl in ids:
                times.append(at_us * 1e-6)
                links.append(dl)
                kinds.append(FAULT_KINDS[kind])
                factors.append(float(factor))
        return cls(np.array(times), np.array(links), np.array(kinds), np.array(factors))

    def check_factors(self) -> None:
        """FaultError unless every event's factor suits its kind (a down 0, a degrade within
        [MIN_DEGRADE_FACTOR, 1], an up 1 or a degrade's range): LinkFaults built by hand
        bypass ``from_records``' checks, and the engines divide by these factors."""
        f, k = self.factor, self.kind
        bad = np.flatnonzero(~((f >= 0) & (f <= 1)) | ((k == DOWN) & (f != 0))
                             | ((k != DOWN) & (f < MIN_DEGRADE_FACTOR)))
        if bad.size:
            i = int(bad[0])
            raise FaultError(f"faults[{i}].factor = {float(f[i])!r}: a down has factor 0, a "
                             f"degrade or an up {MIN_DEGRADE_FACTOR:g} <= factor <= 1")

    def capacity_factor_at(self, n_dlinks: int, t: float) -> np.ndarray:
        """Fraction of nominal bandwidth of every directed link after all events at time <= t."""
        f = np.ones(n_dlinks)
        upto = np.searchsorted(self.time, t, side="right")
        f[self.dlink[:upto]] = self.factor[:upto]  # later events overwrite earlier ones
        return f

    def alive_at(self, n_dlinks: int, t: float) -> np.ndarray:
        return self.capacity_factor_at(n_dlinks, t) > 0

    def to_records(self, topology: Topology) -> list[dict]:
        out = []
        for t, d, k, f in zip(self.time, self.dlink, self.kind, self.factor):
            rec = {"link": [int(topology.dlink_src[d]), int(topology.dlink_dst[d])],
                   "kind": FAULT_NAMES[int(k)], "at_us": _at_us(float(t)),
                   "direction": "forward"}
            if k == DEGRADE:
                rec["factor"] = float(f)
            out.append(rec)
        return out


def _at_us(t: float) -> float:
    """Microseconds that ``from_records`` turns back into exactly ``t`` seconds
    (``at_us * 1e-6``), the shortest such decimal: ``t * 1e6`` alone is not always one (a
    fault at 0.1 us, 1e-07 s, came back as 0.09999999999999999 us, which strikes at
    9.999999999999999e-08 s, before any event at 0.1 us)."""
    x = t * 1e6
    if not math.isfinite(x):
        return x
    near = [x]
    for direction in (math.inf, -math.inf):
        y = x
        for _ in range(4):
            y = math.nextafter(y, direction)
            near.append(y)
    exact = [y for y in near if y >= 0 and y * 1e-6 == t]
    return min(exact, key=lambda y: (len(repr(y)), abs(y - x))) if exact else x


def random_failures(topology: Topology, fraction: float | None = None, count: int | None = None,
                    kind: str = "down", factor: float = 0.25, layer: str = "any",
                    at_us: float = 0.0, seed: int = 0) -> LinkFaults:
    """Pick physical links at random (seeded) and fail or degrade them in both directions.

    ``layer`` restricts the draw to links of one tier (see ``Topology.layer_names``); ``any``
    draws from all links. Exactly one of ``fraction`` (of the candidate links, rounded to the
    nearest integer, at least one when fraction > 0) or ``count`` must be given.
    """
    if kind not in ("down", "degrade"):
        raise FaultError(f"kind = {kind!r}: random failures are down or degrade")
    if kind == "degrade":
        check_degrade_factor(factor, "factor")
    if layer == "any":
        cand = np.arange(topology.n_links)
    else:
        try:
            cand = np.flatnonzero(topology.link_layer == topology.layer_id(layer))
        except TopologyError as e:
            raise FaultError(str(e)) from None
    if (fraction is None) == (count is None):
        raise FaultError("give exactly one of fraction or count")
    if isinstance(at_us, bool) or not isinstance(at_us, (int, float, np.integer, np.floating)) \
            or not is_finite(at_us) or at_us < 0:
        raise FaultError(f"at_us = {at_us!r}: expected a time >= 0")
    if count is not None and (isinstance(count, bool) or
                              not isinstance(count, (int, np.integer))):
        raise FaultError(f"count = {count!r}: expected a whole number of links")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float, np.floating)) \
                or not (0 < fraction < 1):
            raise FaultError(f"fraction = {fraction!r}: expected 0 < fraction < 1")
        count = max(1, int(round(fraction * len(cand))))
    if not (0 <= count <= len(cand)):
        raise FaultError(f"count = {count}: the {layer} layer has {len(cand)} links")
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(cand, size=count, replace=False))
    d = np.empty(2 * count, dtype=np.int64)
    d[0::2] = 2 * chosen
    d[1::2] = 2 * chosen + 1
    k = DOWN if kind == "down" else DEGRADE
    return LinkFaults(np.full(2 * count, at_us * 1e-6), d, np.full(2 * count, k),
                      np.full(2 * count, 0.0 if kind == "down" else factor))
