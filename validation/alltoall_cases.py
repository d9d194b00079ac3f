"""The all-to-all case matrix of issue 17 (flow engine vs packet engine), and its split into a
development set and a held-out set.

A case is a fabric, a routing policy, a per-pair size, an all-to-all algorithm (or the skewed
all-to-all-v) and the packet engine's transports it is compared under (``tcp`` with buffers
deep enough that nothing drops, and ``dcqcn``). ``scenario(case, engine, options)`` turns it
into the scenario table a user would write (``Scenario.from_dict``), so the harness runs
exactly what ``netcosim run`` runs.

Held-out set (issue 17: "the test set above is not used to fit them"): a later corrected flow
model may be fitted or tuned on the development cases only; the held-out cases are measured
for the record and must not influence it. The split keeps every fabric family and every size
on the development side and holds out, by rule:

* every 16 MiB-per-pair case (the large-size end: does a correction extrapolate in size?);
* every case on fullflat (spray routing) and the torus (does it carry over to fabric families
  it never saw?);
* the Zipf all-to-all-v on the fat-tree (the skewed workload on a fabric it was not tuned on);
* two_tier with the hierarchical algorithm at 1 MiB (a multi-phase schedule mid-size).

Development direct-connect cases (added after the split, for a rule about hosts that forward;
the held-out 4x4 torus stays held out): an 8-host ring, a 3x3 torus and a 4x4x2 torus, 100
Gb/s, 1 us, dor, 64 KiB and 1 MiB per pair (``ring8_*``, ``torus33_*``, ``torus442_*``).

``HELD_OUT`` below is that list, name by name (docs/flow_engine.md repeats it).
"""
from __future__ import annotations

from dataclasses import dataclass, field

KIB = 1 << 10
MIB = 1 << 20
SIZES = (64 * KIB, MIB, 16 * MIB)
TRANSPORTS = ("tcp", "dcqcn")

# Deep buffers for tcp: nothing may drop, so the comparison is about sharing, not about loss
# recovery. Without loss, slow start never ends and the windows grow until the senders have
# handed everything to the fabric: fat_tree k=8 at 16 MiB per pair dropped 9,016 packets with
# 100,000 per port (docs/ns3.md's alltoall_deep_k8 depth), so the depth is far above any
# queue a case here can build (the table notes drops if a run ever has any). Buffers cost
# nothing until packets fill them.
TCP_DEEP = {"transport": "tcp", "mtu": 9000, "buffer_packets": 10_000_000}
# dcqcn with its defaults (lossless PFC fabric, nothing drops) at the same MTU
DCQCN = {"transport": "dcqcn", "mtu": 9000}
PACKET_OPTIONS = {"tcp": TCP_DEEP, "dcqcn": DCQCN}
# the flow engine's runs: the fluid max-min model, and its TCP start-up model (compared with
# the packet engine's tcp only; dcqcn has no counterpart in the flow engine)
# and the many-to-many contention model (``[engine] contention``, netcore/flow/contention.py)
# with each packet transport's efficiencies, compared with that transport only
FLOW_RUNS = (("fluid", {"transport": "fluid"}), ("flowtcp", {"transport": "tcp", "mtu": 9000}),
             ("contention_tcp", {"transport": "fluid", "contention": "tcp"}),
             ("contention_dcqcn", {"transport": "fluid", "contention": "dcqcn"}))

ZIPF_S = 1.2  # Zipf exponent of the expert popularity (docs/scenarios.md example)


@dataclass(frozen=True)
class Fabric:
    name: str
    topology: dict
    routing: str


FABRICS = {f.name: f for f in (
    Fabric("ft4", {"kind": "fat_tree", "k": 4, "link_gbps": 400, "latency_us": 0.5}, "ecmp"),
    Fabric("ft8", {"kind": "fat_tree", "k": 8, "link_gbps": 400, "latency_us": 0.5}, "ecmp"),
    Fabric("ls1", {"kind": "leaf_spine", "leaves": 4, "hosts_per_leaf": 8, "spines": 2,
                   "oversubscription": 1.0, "link_gbps": 100, "latency_us": 1.0}, "ecmp"),
    Fabric("ls2", {"kind": "leaf_spine", "leaves": 4, "hosts_per_leaf": 8, "spines": 2,
                   "oversubscription": 2.0, "link_gbps": 100, "latency_us": 1.0}, "ecmp"),
    # rail-optimised: 4 nodes x 8 GPUs, NVLink-5-class scale-up, one 400G NIC per GPU
    Fabric("tt", {"kind": "two_tier", "nodes": 4, "gpus_per_node": 8, "scaleup_gbps": 7200,
                  "nic_gbps": 400, "rails": True}, "ecmp"),
    Fabric("ff", {"kind": "fullflat", "n_gpus": 32, "planes": 8, "switch_radix": 64,
                  "gpu_gbps": 7200, "latency_us": 0.5}, "spray"),
    Fabric("torus", {"kind": "torus", "dims": [4, 4], "link_gbps": 100, "latency_us": 1.0},
           "dor"),
    # development direct-connect fabrics (hosts forward), other shapes than the held-out 4x4
    # torus: a 1-D ring of 8, a 3x3 torus (odd sides, no tie in dor's shortest way) and a
    # 3-D 4x4x2 torus (32 hosts; its size-2 dimension has one link per pair)
    Fabric("ring8", {"kind": "torus", "dims": [8], "link_gbps": 100, "latency_us": 1.0},
           "dor"),
    Fabric("torus33", {"kind": "torus", "dims": [3, 3], "link_gbps": 100, "latency_us": 1.0},
           "dor"),
    Fabric("torus442", {"kind": "torus", "dims": [4, 4, 2], "link_gbps": 100,
                        "latency_us": 1.0}, "dor"),
)}


@dataclass(frozen=True)
class Case:
    name: str
    fabric: str
    per_pair: int          # bytes per (sender, receiver) pair; the mean one for all_to_all_v
    algorithm: str = "direct"
    op: str = "all_to_all"
    options: dict = field(default_factory=dict)  # the collective's options (hierarchical)
    routing: str | None = None  # a policy other than the fabric's (diagnostics only)

    @property
    def held_out(self) -> bool:
        return self.name in HELD_OUT


def _size_label(b: int) -> str:
    return f"{b // MIB}M" if b >= MIB else f"{b // KIB}K"


def _cases() -> list[Case]:
    out = []
    for fab in ("ft4", "ft8", "ls1", "ls2", "ff", "torus"):
        for s in SIZES:
            # ft8 at 16 MiB per pair (272 GB, ~30 M packets per transport) is the slowest
            # case: 60-93 s (tcp) and 50-56 s (dcqcn) of packet engine here, within budget
            out.append(Case(f"{fab}_direct_{_size_label(s)}", fab, s))
    # the issue's headline case (fat_tree k=8, 256 KiB per pair), also a diagnostics case
    out.append(Case("ft8_direct_256K", "ft8", 256 * KIB))
    for s in SIZES:
        out.append(Case(f"tt_direct_{_size_label(s)}", "tt", s))
        # PXN-style: gather by local index over NVLink, then one message per rail peer
        out.append(Case(f"tt_hier_{_size_label(s)}", "tt", s, algorithm="hierarchical",
                        options={"leader": "rail"}))
    # skewed expert load: rank j receives in proportion to its experts' Zipf share
    out.append(Case("ls2_zipf_1M", "ls2", MIB, op="all_to_all_v"))
    out.append(Case("ft4_zipf_1M", "ft4", MIB, op="all_to_all_v"))
    # development direct-connect cases (added for the tcp rule on forwarding hosts; the 4x4
    # torus itself stays held out): 64 KiB and 1 MiB per pair on each development shape
    for fab in ("ring8", "torus33", "torus442"):
        for s in (64 * KIB, MIB):
            out.append(Case(f"{fab}_direct_{_size_label(s)}", fab, s))
    return out


HELD_OUT = frozenset({
    "ft4_direct_16M", "ft8_direct_16M", "ls1_direct_16M", "ls2_direct_16M",
    "tt_direct_16M", "tt_hier_16M",
    "ff_direct_64K", "ff_direct_1M", "ff_direct_16M",
    "torus_direct_64K", "torus_direct_1M", "torus_direct_16M",
    "ft4_zipf_1M", "tt_hier_1M",
})

CASES = {c.name: c for c in _cases()}
assert HELD_OUT <= set(CASES), HELD_OUT - set(CASES)


def zipf_matrix(n: int, mean_pair: int, s: float = ZIPF_S, experts_per_rank: int = 4,
                top_k: int = 8) -> list[list[int]]:
    """Bytes rank i sends to rank j in an expert-parallel dispatch with Zipf expert popularity,
    built as compute/ builds it (compute.model.Model.expert_shares, compute/layers.py): expert
    r's share ~ r^-s (expert 0 the most popular), capped at 1/top_k with the excess spread in
    proportion; experts placed contiguously, ``experts_per_rank`` per rank; every rank sends
    the same volume ``n * mean_pair`` split by the receivers' shares (row i, column j =
    volume x share_j), so the mean pair moves ``mean_pair`` bytes."""
    import numpy as np

    from compute.model import capped_shares

    E = n * experts_per_rank
    p = capped_shares(np.arange(1, E + 1, dtype=float) ** -s, top_k)  # as the MoE model does
    share = p.reshape(n, experts_per_rank).sum(axis=1)
    row = np.rint(n * mean_pair * share).astype(np.int64)
    return [row.tolist() for _ in range(n)]


def scenario(case: Case, engine: str, options: dict, seed: int = 1) -> dict:
    """The scenario table of ``case`` on ``engine`` with engine ``options`` (what a user
    would write in TOML): protocol simple, no step latency (pure data movement)."""
    fab = FABRICS[case.fabric]
    from netcosim.scenario import Scenario

    n = Scenario.from_dict({"topology": fab.topology}).build_topology().n_hosts
    wl = {"kind": "collective", "op": case.op, "algorithm": case.algorithm,
          "protocol": "simple", "step_latency_us": 0}
    if case.op == "all_to_all_v":
        wl["bytes_matrix"] = zipf_matrix(n, case.per_pair)
    else:
        wl["bytes"] = case.per_pair * n  # a rank's send buffer: n pieces of per_pair
    if case.options:
        wl["options"] = dict(case.options)
    return {"name": case.name, "seed": seed, "topology": dict(fab.topology),
            "routing": {"policy": case.routing or fab.routing}, "engine": {"kind": engine, **options},
            "workload": wl}
