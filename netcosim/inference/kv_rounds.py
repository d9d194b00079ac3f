"""When one simulated round of KV transfers stands, exactly, for every round.

The KV cost curves (netcosim/inference/kv_transfer.py) are measured in rounds: in round s every
prefill replica p sends, GPU k to GPU k, to decode replica (p + s) mod dp_d, all at once.
Measuring every round costs dp_d simulations of every prefill GPU's flows, about GPUs^2; this
module says when round 0 alone gives every round's times, to the last bit.

The argument. Take a fault-free fabric (faults: below) on which hosts do not forward, and a
column j of the transfer (GPU j mod |P| of every prefill replica, GPU j mod |D| of every
decode replica: hosts A_j and B_j). Suppose

1. every host of A_j and B_j is wired to switches only, and to each switch once;
2. a non-empty set C_j of switches is wired to every host of A_j and B_j, and no other
   switch is wired to both a host of A_j and a host of B_j;
3. C_j holds no scale-up switch (so routing never keeps a pair on its scale-up links);
4. the routing is a shortest-path policy that cannot choose among C_j differently for
   different decode hosts: C_j is one switch; or the policy stripes over the planes of a
   fullflat fabric and C_j holds one switch per plane; or it splits over every shortest path
   (spray, adaptive);
5. for each switch w of C_j the links w -> y have one bandwidth and one latency over all y in
   B_j.

Then a flow x -> y of column j has distance 2, its shortest paths are exactly x -> w -> y for
w in C_j (1, 2), and the policy's path (4) is the same list of entries, in the same order
with the same weights, for every y: only the links w -> y name y. So the whole round s is
round 0 with decode replica d renamed (d + s) mod dp_d, that is with the links w -> y
renamed among themselves (a permutation of links of equal bandwidth and latency, 5), every
flow in the same schedule position and every path entry in the same place. The flow engine
never orders links by their ids where it matters: its per-link state is indexed by id, and
every order it follows (flows, the entries of a path, the slots of a link, the links a
solve opens and its ties) comes from the schedule and the paths. So round s gives round 0's
times bit for bit, pair for pair: times[p, (p + s) mod dp_d] = times[p, p mod dp_d].
(The pairs of one round here even share no link, but the argument does not need it.)

Faults (all at t = 0, kv_transfer refuses the others): a fault on a link no KV path uses
changes no path and no capacity on one (removing links cannot create a shorter path, and the
2-hop paths stay alive); a degrade of a prefill GPU's link x -> w is the same in every round
(the renaming does not touch it). A fault on a link w -> y into a decode GPU, or a link on a
path going down, breaks the renaming: every round is then simulated.

The packet engine is left out (its per-packet events and their ties are not argued here), as
are non-shortest policies (valiant, dor) and fabrics whose GPUs relay (a torus). Everything
not covered measures each round a request uses, as before.
"""
from __future__ import annotations

import numpy as np

from topo.arrays import unique
from topo.routing import spans

SHORTEST = ("shortest", "ecmp", "dmodk", "dmodk_level", "spray", "adaptive")
SPLIT = ("spray", "adaptive")  # split over every shortest path: C_j can be several switches


def columns(p_hosts: np.ndarray, d_hosts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(prefill hosts (dp_p, K), decode hosts (dp_d, K)): column j holds GPU j mod |replica|
    of every replica, K the larger replica (kv_transfer.gpu_pairs)."""
    P = p_hosts.reshape(p_hosts.shape[0], -1)
    D = d_hosts.reshape(d_hosts.shape[0], -1)
    k = np.arange(max(P.shape[1], D.shape[1]))
    return P[:, k % P.shape[1]], D[:, k % D.shape[1]]


def _neighbours(topology, hosts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(host of each incidence, neighbour node) over the links of ``hosts``."""
    ptr, nbr, _ = topology.adjacency
    deg = ptr[hosts + 1] - ptr[hosts]
    return np.repeat(hosts, deg), nbr[spans(ptr[hosts], deg)].astype(np.int64)


def _wiring(topology, hosts: np.ndarray) -> str | None:
    """Why condition 1 fails for ``hosts`` (None: it holds)."""
    own, nb = _neighbours(topology, hosts)
    if (nb < topology.n_hosts).any():
        return "a GPU of the pools is wired to another GPU"
    # the adjacency lists are sorted by neighbour: a repeat is a parallel link
    if ((np.diff(nb) == 0) & (np.diff(own) == 0)).any():
        return "a GPU of the pools has two links to one switch"
    return None


def _common(topology, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, str | None]:
    """(C_j, why condition 2 fails or None) for column hosts ``a``, ``b``."""
    n = topology.n_nodes
    ca = np.bincount(_neighbours(topology, a)[1], minlength=n)
    cb = np.bincount(_neighbours(topology, b)[1], minlength=n)
    common = (ca == len(a)) & (cb == len(b))
    if not common.any():
        return common.nonzero()[0], "GPUs of one column share no switch (paths climb further)"
    if ((ca > 0) & (cb > 0) & ~common).any():
        return common.nonzero()[0], "a switch joins only some prefill and decode GPUs"
    return common.nonzero()[0], None


def _scaleup_switches(topology) -> np.ndarray:
    if "scaleup" not in topology.layer_names:
        return np.zeros(0, dtype=np.int64)
    on = topology.link_layer == topology.layer_id("scaleup")
    ends = np.concatenate([topology.link_u[on], topology.link_v[on]]).astype(np.int64)
    return ends[ends >= topology.n_hosts]


def _policy_ok(routing, common: np.ndarray) -> str | None:
    """Why condition 4 fails for a column whose shared switches are ``common``, as far as the
    policy alone tells (striping is checked with the links, ``_links_ok``)."""
    if routing.striped or routing.policy in SPLIT or len(common) == 1:
        return None
    return f"{routing.policy} chooses among {len(common)} shared switches by destination"


def _pairs(hosts: np.ndarray, commons: list) -> tuple[np.ndarray, np.ndarray]:
    """(host, switch) of every host of every column with every shared switch of its column,
    column after column, switch-major: ``hosts`` (replicas, columns)."""
    n = [len(c) for c in commons]
    h = np.concatenate([np.tile(hosts[:, j], k) for j, k in enumerate(n)])
    w = np.concatenate([np.repeat(c, hosts.shape[0]) for c in commons])
    return h, w


def _links_ok(topology, routing, faults, P: np.ndarray, D: np.ndarray,
              commons: list) -> str | None:
    """Conditions 4 (planes) and 5 and the faults, over every column at once."""
    h, w = _pairs(P, commons)
    up = topology.dlink_ids(h, w)  # x -> w
    h, w = _pairs(D, commons)
    down = topology.dlink_ids(w, h)  # w -> y, in groups of dp_d links from one switch
    for a in (topology.dlink_bw[down], topology.dlink_lat[down]):
        g = a.reshape(-1, D.shape[0])
        if (g != g[:, :1]).any():
            return "links into the decode GPUs differ in bandwidth or latency"
    if routing.striped:
        from topo.builders.fullflat import dlink_planes

        plane = dlink_planes(topology)[down[::D.shape[0]]]  # one per (column, switch)
        every = np.arange(routing.planes)
        for p in np.split(plane, np.cumsum([len(c) for c in commons])[:-1]):
            if not np.array_equal(np.sort(p), every):
                return "the planes do not each hold one switch shared by a column"
    return _faults_ok(faults, up, down)


def _faults_ok(faults, up: np.ndarray, down: np.ndarray) -> str | None:
    """Why the faults break the renaming (None: they do not); ``up``: links x -> w of the
    prefill GPUs on the paths, ``down``: links w -> y into the decode GPUs."""
    if faults is None or not len(faults):
        return None
    d = np.asarray(faults.dlink)
    if np.isin(d, down).any():
        return "a fault on a link into a decode GPU"
    if (np.isin(d, up) & (np.asarray(faults.factor) == 0)).any():
        return "a link on the KV paths goes down"
    return None


def rounds_alike(topology, routing, faults, engine: str, p_hosts: np.ndarray,
                 d_hosts: np.ndarray) -> str | None:
    """None when round 0 gives every round's times exactly (module docstring), else why not
    (a phrase for the report). Linear in the pools' GPUs and their links."""
    if engine != "flow":
        return f"engine {engine!r}"
    if topology.hosts_forward:
        return "the GPUs relay traffic"
    if routing.policy not in SHORTEST:
        return f"routing {routing.policy!r} is not a shortest-path policy"
    why = _wiring(topology, unique(np.concatenate([p_hosts.ravel(), d_hosts.ravel()])
                                   .astype(np.int64)))
    if why:
        return why
    P, D = (x.astype(np.int64) for x in columns(p_hosts, d_hosts))
    su = _scaleup_switches(topology)
    commons = []
    for j in range(P.shape[1]):
        common, why = _common(topology, P[:, j], D[:, j])
        if why is None and np.isin(common, su).any():
            why = "a column shares its scale-up switch"
        why = why or _policy_ok(routing, common)
        if why:
            return why
        commons.append(common)
    return _links_ok(topology, routing, faults, P, D, commons)
