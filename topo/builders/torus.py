"""k-ary n-cube with mixed radix: a torus of any number of dimensions, hosts are the nodes.

Node id = row-major index of its coordinates (last dimension varies fastest), as
``numpy.ravel_multi_index``. Along a dimension of size d > 2 every node links to its +1
neighbour with wrap-around (d links per ring); a dimension of size 2 has ONE link per pair
(the + and - neighbours are the same node, and a Topology holds no parallel links: model a
doubled link as one link of twice the bandwidth if you need it); a dimension of size 1 has
none. There are no switches and hosts forward traffic (``hosts_forward=True``).

Layers are named ``dim0, dim1, ...`` (one per dimension, so faults can target a dimension).
Diameter: sum(d // 2). Bisection (Dally & Towles, "Principles and Practices of
Interconnection Networks", ch. 3: a k-ary n-cube has bisection 2 k^(n-1) bidirectional
links): halving the largest dimension d_max cuts 2 N / d_max links (N / 2 when d_max = 2); set
when d_max is even; for an all-odd largest dimension ``topo.metrics`` computes a max-flow cut.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from topo.builders._check import as_gbps, as_int, as_latency_us, check_size
from topo.errors import InputError
from topo.topology import Topology, us


def torus(dims, link_gbps=100.0, latency_us=1.0, *, where: str = "topology") -> Topology:
    if isinstance(dims, np.ndarray):
        dims = dims.tolist()
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or len(dims) == 0:
        raise InputError(f"{where}.dims = {dims!r}: expected a list of sizes, e.g. [4, 4, 4]")
    if len(dims) > 64:
        raise InputError(f"{where}.dims = {dims!r}: at most 64 dimensions")
    dims = tuple(as_int(d, f"{where}.dims[{i}]", lo=1) for i, d in enumerate(dims))
    bw = as_gbps(link_gbps, f"{where}.link_gbps")
    lat = us(as_latency_us(latency_us, f"{where}.latency_us"))
    n = math.prod(dims)
    n_links = sum(n if d > 2 else (n // 2 if d == 2 else 0) for d in dims)
    check_size(n, n_links, f"{where}.dims", list(dims))

    ids = np.arange(n, dtype=np.int64)
    coords = np.stack(np.unravel_index(ids, dims), axis=1).astype(np.int32)
    us_, vs_, layer = [], [], []
    stride = n
    for axis, d in enumerate(dims):
        stride //= d
        if d == 1:
            continue
        c = coords[:, axis].astype(np.int64)
        src = ids[c == 0] if d == 2 else ids  # size 2: one link per pair, from the 0 side
        cs = c[src]
        us_.append(src)
        vs_.append(src + stride * ((cs + 1) % d - cs))
        layer.append(np.full(len(src), axis, dtype=np.int8))
    link_u = np.concatenate(us_) if us_ else np.zeros(0, np.int64)
    link_v = np.concatenate(vs_) if vs_ else np.zeros(0, np.int64)
    link_layer = np.concatenate(layer) if layer else np.zeros(0, np.int8)

    dmax = max(dims)
    params = {"dims": dims, "link_gbps": float(link_gbps), "latency_us": float(latency_us),
              "diameter_hops": sum(d // 2 for d in dims)}
    if n == 1:
        params["bisection_Bps"] = 0.0
    elif dmax % 2 == 0:
        params["bisection_Bps"] = (n // 2 if dmax == 2 else 2 * n // dmax) * bw
    return Topology("torus", n, 0, link_u, link_v, np.full(len(link_u), bw),
                    np.full(len(link_u), lat), link_layer,
                    tuple(f"dim{i}" for i in range(len(dims))),
                    host_group=np.zeros(n, np.int32), coords=coords, params=params,
                    hosts_forward=True)
