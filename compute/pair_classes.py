"""An all-to-all in the scalable form: its pairs gathered into classes that move together.

A direct all-to-all over g ranks is g(g-1) transfers that start together and have no order
among them. Under ``network_detail = "auto"`` each template transfer used to be one node (a
member set over the copies of the collective at one chain position), so an expert all-to-all
cost g(g-1) nodes per instance: DeepSeek-V3 with EP 64 needed 23.2 M schedule nodes for one
step, whatever the GPU count, and did not fit in memory at 16,384 GPUs.

Here one instance becomes one member set per *class* of pairs, keyed by

* bytes (an all-to-all-v under an expert imbalance sends each rank's column of bytes);
* whether both ends share a host group (a scale-up domain, a leaf: ``Topology.host_group``),
  so a class is held back by one kind of link (the NVLink or the NIC of its ends), loaded
  alike on a symmetric fabric: the fluid model gives its pairs one rate, which is what a member
  set's lock step assumes;
* the *timing key* of each end: ranks with one key run identical compute chains and reach the
  collective together. A pair waits for both its ends (the receiver posts its receive), so
  pairs between ranks that are ready at different times (an expert imbalance, a slowed GPU, an
  expert group simulated on its own beside a fault) must not wait for one another; ranks of
  such groups get keys of their own, and their pairs stay apart.

A class node waits for the ready nodes of its members' ends, and the done node of each end
waits for every class that touches it, as the per-pair form wires each pair. A pair that
routing or a fault leaves slower than its class is split off by the flow engine
(netcore/flow/uneven_split.py, fault_split.py), as for every member set.

A fabric whose hosts all share one group (a torus, a custom graph without groups) gives the
pairs no such classes (on a torus the paths of an all-to-all differ in length and load), so
there the caller keeps one node per pair.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from netcore.schedule import TRANSFER, Schedule
from topo.arrays import unique
from topo.hops import pair_hops
from topo.topology import Topology


def independent_transfers(tpl: Schedule) -> bool:
    """Whether every node of ``tpl`` is a point-to-point transfer with no dependency among
    them (the direct all-to-all and all-to-all-v with one chunk)."""
    return bool(tpl.n and (tpl.kind == TRANSFER).all() and len(tpl.dep_idx) == 0
                and (tpl.dst >= 0).all())


def has_groups(host_group) -> bool:
    """Whether the hosts fall into more than one group (the classes mean something)."""
    hg = np.asarray(host_group)
    return bool(hg.size and (hg != hg.flat[0]).any())


@dataclass
class PairClasses:
    """Classes of the pairs of one run of copies of a template (copies, g endpoints each)."""

    ptr: np.ndarray  # int64 (c+1,): class i is members ptr[i]:ptr[i+1]
    src: np.ndarray  # int64 (M,) host of each member, class after class
    dst: np.ndarray  # int64 (M,)
    size: np.ndarray  # int64 (c,) bytes of each member of the class
    copy: np.ndarray  # int64 (c,) copy (row of hosts) of the class's first member
    pair: np.ndarray  # int64 (c,) template node of the class's first member
    end_cls: np.ndarray  # int64 (E,) class of each (class, endpoint) incidence, distinct
    end_pos: np.ndarray  # int64 (E,) its endpoint: copy * g + endpoint

    @property
    def n(self) -> int:
        return len(self.size)


def classes(tpl: Schedule, hosts: np.ndarray, topology: Topology,
            tkey: np.ndarray) -> PairClasses:
    """The classes of the pairs of ``tpl`` over ``hosts`` (copies, g), ``tkey`` (copies, g) the
    timing key of every endpoint. Every (copy, template node) is a member; members are keyed
    by (bytes, same host group, hops, source key, destination key) and keep their (copy, node)
    order inside a class (deterministic)."""
    hosts = np.asarray(hosts, dtype=np.int64)
    tkey = np.asarray(tkey, dtype=np.int64)
    f, g = hosts.shape
    src = hosts[:, tpl.src].ravel()
    dst = hosts[:, tpl.dst].ravel()
    hg = np.asarray(topology.host_group)
    same = (hg[src] == hg[dst]).astype(np.int64)
    # the hops tell the tiers a path climbs: another rail through a spine, another pod
    # through the core, another dragonfly group over a global link
    hops = pair_hops(topology, src, dst)
    size = np.broadcast_to(np.asarray(tpl.size, dtype=np.int64), (f, tpl.n)).ravel()
    ks, kd = tkey[:, tpl.src].ravel(), tkey[:, tpl.dst].ravel()
    order = np.lexsort((kd, ks, hops, same, size))  # stable: (copy, node) order in a class
    keys = np.stack([size[order], same[order], hops[order], ks[order], kd[order]])
    cut = np.flatnonzero((np.diff(keys, axis=1) != 0).any(axis=0)) + 1
    first = order[np.concatenate([[0], cut])]
    ptr = np.concatenate([[0], cut, [len(order)]]).astype(np.int64)
    # (class, endpoint) incidences: both ends of every member, each once
    cls = np.repeat(np.arange(len(first)), np.diff(ptr))
    copy = order // tpl.n
    node = order % tpl.n
    pos = np.concatenate([copy * g + tpl.src[node], copy * g + tpl.dst[node]])
    inc = unique(np.concatenate([cls, cls]) * (f * g) + pos)
    return PairClasses(ptr, src[order], dst[order], size[first], first // tpl.n,
                       first % tpl.n, inc // (f * g), inc % (f * g))
