"""Import an ASTRA-sim analytical network description (``network.yml``) as a netcosim Topology.

The file (ASTRA-sim 2.x, astra-network-analytical ``NetworkParser``) has four keys, one list
entry per dimension:

```yaml
topology: [ Ring, FullyConnected, Switch ]   # building block of each dimension
npus_count: [ 2, 8, 4 ]                      # NPUs per dimension (64 NPUs in all)
bandwidth: [ 200.0, 100.0, 50.0 ]            # GB/s per link and direction
latency: [ 50.0, 500.0, 2000.0 ]             # ns per link
```

Any other key is refused (naming the file and the key): silently ignoring a setting would
simulate a different network from the one the user described.

Mapping (mirrors astra-network-analytical's congestion-aware ``MultiDimTopology``):

* NPU ids: the address of NPU ``i`` is ``(a_0, .., a_{D-1})`` with dimension 0 varying fastest,
  ``i = a_0 + n_0 (a_1 + n_1 (a_2 + ...))``. NPUs are netcosim hosts ``0..N-1``.
* Dimension ``d`` joins the ``n_d`` NPUs that differ only in ``a_d`` (one "basic topology" per
  combination of the other coordinates):
  - ``Ring``: NPU ``j`` -- NPU ``j+1 mod n_d`` (bidirectional ring; with ``n_d = 2`` one link);
  - ``FullyConnected``: every pair of the ``n_d`` NPUs;
  - ``Switch``: one new switch per basic topology, linked to each of its ``n_d`` NPUs.
  Switch ids follow the NPUs, created dimension by dimension, basic topologies in order of
  their lowest NPU id (the order ASTRA-sim creates them).
* Every link is full duplex with ``bandwidth[d]`` in each direction and latency
  ``latency[d]`` ns. NPUs forward traffic between dimensions (``hosts_forward``), as ASTRA-sim's
  dimension-order routes pass through intermediate NPUs.
* Bandwidth convention: ASTRA-sim converts GB/s to bytes/ns with 1 GB = 2^30 bytes
  (``bw_GBps_to_Bpns`` in astra-network-analytical ``common/NetworkFunction.cc``: "1 GB is 2^30
  B"), so by default ``bandwidth: 100`` becomes 100 * 2^30 bytes/s = 858.99 Gbps. Pass
  ``gb = "decimal"`` for 10^9 bytes (some forks changed the conversion to decimal GB).
* Routing: with only ``Ring`` dimensions the fabric is a torus and carries coordinates, so
  ``routing.policy = "dor"`` reproduces ASTRA-sim's routes exactly (dimension 0 first, shorter
  way round each ring, ties clockwise). With Switch or FullyConnected dimensions use
  ``shortest``/``ecmp``: paths have the same hop counts as ASTRA-sim's dimension-order routes,
  but ECMP may also use other dimension orders.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from topo.builders._check import MAX_GBPS, MAX_LATENCY_US, MAX_LINKS, MIN_GBPS
from topo.errors import InputError
from topo.errors import is_finite, to_float
from topo.topology import Topology, us

KEYS = ("topology", "npus_count", "bandwidth", "latency")
BLOCKS = ("Ring", "FullyConnected", "Switch")
GB_BYTES = {"binary": float(1 << 30), "decimal": 1e9}


def load_network(path, gb: str = "binary") -> Topology:
    """Read an ASTRA-sim ``network.yml``."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InputError(f"ASTRA-sim network file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"ASTRA-sim network file {str(path)!r} is a directory (give its "
                         f"network.yml)") from None
    except UnicodeDecodeError as e:
        # a binary file (a Chakra trace, an archive) given for the YAML: said as the codec's
        # "'utf-8' codec can't decode byte 0xb9 in position 0"
        raise InputError(f"ASTRA-sim network file {str(path)!r}: not a text (YAML) file "
                         f"(byte {e.object[e.start]:#04x} at offset {e.start} is not "
                         f"UTF-8)") from None
    except OSError as e:
        raise InputError(f"ASTRA-sim network file {str(path)!r}: cannot be read "
                         f"({e.strerror or e})") from None
    try:
        data = yaml.load(text, Loader=_strict_loader())
    except _DuplicateKey as e:
        raise InputError(f"{path}: key {e.key!r} appears twice (line {e.line}); YAML keeps "
                         f"only the last, so the file is ambiguous") from None
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not valid YAML ({' '.join(str(e).split())})") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply") from None
    return from_dict(data, str(path), gb)


class _DuplicateKey(Exception):
    def __init__(self, key, line):
        super().__init__(key)
        self.key, self.line = key, line


_LOADER = None


def _strict_loader():
    """yaml.SafeLoader that refuses a mapping key given twice (SafeLoader keeps the last)."""
    global _LOADER
    if _LOADER is None:
        import yaml

        class StrictLoader(yaml.SafeLoader):
            pass

        def mapping(loader, node, deep=False):
            loader.flatten_mapping(node)
            seen = set()
            for key_node, _ in node.value:
                key = loader.construct_object(key_node, deep=deep)
                try:
                    dup = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: construct_mapping says so
                    continue
                if dup:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1)
            return loader.construct_mapping(node, deep)

        StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
        # YAML 1.2 floats with an exponent but no '.' or no exponent sign (1e3, 2.5e-1,
        # 1.0e300): ASTRA-sim's yaml-cpp reads them as numbers, PyYAML's YAML 1.1 as strings,
        # which were refused as "bandwidth[0] = '1e3': expected a number"
        StrictLoader.add_implicit_resolver(
            "tag:yaml.org,2002:float",
            re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
            list("-+0123456789."))
        _LOADER = StrictLoader
    return _LOADER


def astra(path, gb: str = "binary", *, where: str = "topology") -> Topology:
    """Builder-style entry (``[topology] kind = "astra"``, ``path = "network.yml"``)."""
    if not isinstance(path, str):
        raise InputError(f"{where}.path = {path!r}: expected the network.yml file name")
    return load_network(path, gb)


def _list(data, key, where, n=None):
    v = data[key]
    if not isinstance(v, list) or not v:
        raise InputError(f"{where}: key {key!r} = {v!r}: expected a non-empty list (one entry "
                         f"per dimension)")
    if n is not None and len(v) != n:
        raise InputError(f"{where}: key {key!r} has {len(v)} entries but topology has {n} "
                         f"dimensions")
    return v


def from_dict(data, where: str = "network.yml", gb: str = "binary") -> Topology:
    """The Topology of a parsed ``network.yml`` (``where`` names the file in errors)."""
    if gb not in GB_BYTES:
        raise InputError(f"gb = {gb!r}: expected \"binary\" (2^30 bytes, ASTRA-sim) or "
                         f"\"decimal\" (10^9 bytes)")
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping with keys {', '.join(KEYS)}")
    for key in data:
        if key not in KEYS:
            raise InputError(f"{where}: key {key!r} is not supported (supported: "
                             f"{', '.join(KEYS)})")
    for key in KEYS:
        if key not in data:
            raise InputError(f"{where}: key {key!r} is missing")
    blocks = _list(data, "topology", where)
    D = len(blocks)
    for d, b in enumerate(blocks):
        if b not in BLOCKS:
            raise InputError(f"{where}: topology[{d}] = {b!r}: expected one of "
                             f"{', '.join(BLOCKS)}")
    npus = _list(data, "npus_count", where, D)
    bws = _list(data, "bandwidth", where, D)
    lats = _list(data, "latency", where, D)
    for d in range(D):
        n, bw, lat = npus[d], bws[d], lats[d]
        if isinstance(n, bool) or not isinstance(n, int) or n <= 1:
            raise InputError(f"{where}: npus_count[{d}] = {n!r}: expected an integer > 1")
        if isinstance(bw, bool) or not isinstance(bw, (int, float)) \
                or not is_finite(bw) or bw <= 0:
            raise InputError(f"{where}: bandwidth[{d}] = {bw!r}: expected a number of GB/s > 0")
        if isinstance(lat, bool) or not isinstance(lat, (int, float)) \
                or not is_finite(lat) or lat < 0:
            raise InputError(f"{where}: latency[{d}] = {lat!r}: expected a number of ns >= 0")
        # the range a scenario's link takes (topo/builders/_check.py): beyond it the rate
        # overflowed to inf (1.0e+300 GB/s: 'links[0]: bandwidth inf Gbps', no file, no key),
        # and the engines' times did (1e-300 GB/s ran a 1 MiB all-reduce in 1.5e297 s); a
        # latency beyond 2^60 ps was accepted, then its --toml table refused
        gbit = to_float(bw) * GB_BYTES[gb] * 8 / 1e9
        if not MIN_GBPS <= gbit <= MAX_GBPS:
            raise InputError(f"{where}: bandwidth[{d}] = {bw!r}: {gbit:g} Gb/s, outside the link "
                             f"rates netcosim takes ({MIN_GBPS:g} to {MAX_GBPS:g} Gb/s)")
        if to_float(lat) / 1e3 > MAX_LATENCY_US:
            raise InputError(f"{where}: latency[{d}] = {lat!r}: expected at most "
                             f"{MAX_LATENCY_US * 1e3:.4g} ns (2^60 ps, the longest delay the "
                             f"engines take)")
    N = int(np.prod(npus, dtype=object))
    n_links = 0
    for d in range(D):
        n, groups = npus[d], N // npus[d]
        per = {"Ring": 1 if n == 2 else n, "FullyConnected": n * (n - 1) // 2,
               "Switch": n}[blocks[d]]
        n_links += per * groups
    if n_links > MAX_LINKS:
        raise InputError(f"{where}: npus_count {npus} with topology {blocks} makes {n_links:,} "
                         f"links; more than a netcosim fabric may have ({MAX_LINKS:,})")

    stride = np.cumprod([1] + list(npus[:-1])).astype(np.int64)
    ids = np.arange(N, dtype=np.int64)
    addr = (ids[:, None] // stride[None, :]) % np.asarray(npus, dtype=np.int64)[None, :]
    us_, vs_, bw_, lat_, layer = [], [], [], [], []
    next_switch = N
    for d in range(D):
        n = npus[d]
        bases = ids[addr[:, d] == 0]  # ascending: ASTRA-sim's creation order
        members = bases[:, None] + stride[d] * np.arange(n)[None, :]  # (groups, n)
        if blocks[d] == "Ring":
            if n == 2:
                u, v = members[:, 0], members[:, 1]
            else:
                u, v = members.ravel(), np.roll(members, -1, axis=1).ravel()
        elif blocks[d] == "FullyConnected":
            a, b = np.triu_indices(n, k=1)
            u, v = members[:, a].ravel(), members[:, b].ravel()
        else:
            sw = next_switch + np.arange(len(bases), dtype=np.int64)
            next_switch += len(bases)
            u, v = members.ravel(), np.repeat(sw, n)
        us_.append(u)
        vs_.append(v)
        bw_.append(np.full(len(u), float(bws[d]) * GB_BYTES[gb]))
        # in us, then seconds as a scenario's latency_us becomes them (topo.topology.us), so
        # the fabric is bit for bit the one written by hand in us: * 1e-9 gave 500 ns as
        # 5.000000000000001e-07 s against latency_us = 0.5's 5e-07 (2 integer ns in 3 differed)
        lat_.append(np.full(len(u), us(float(lats[d]) / 1e3)))
        layer.append(np.full(len(u), d, dtype=np.int8))
    n_sw = next_switch - N
    all_ring = all(b == "Ring" for b in blocks)
    params = {"source": "astra-sim network.yml", "file": where, "topology": tuple(blocks),
              "npus_count": tuple(int(x) for x in npus),
              "bandwidth_GBps": tuple(float(x) for x in bws),
              "latency_ns": tuple(float(x) for x in lats), "gb_bytes": GB_BYTES[gb]}
    if all_ring:
        params["dims"] = tuple(int(x) for x in npus)  # torus view: `dor` routing works
    single_direct = D == 1 and blocks[0] != "Ring"
    return Topology(
        kind="astra",
        n_hosts=N, n_switches=n_sw,
        link_u=np.concatenate(us_), link_v=np.concatenate(vs_),
        link_bw=np.concatenate(bw_), link_lat=np.concatenate(lat_),
        link_layer=np.concatenate(layer),
        layer_names=tuple(f"dim{d}_{b}" for d, b in enumerate(blocks)),
        host_group=(ids // npus[0]).astype(np.int32),
        coords=addr.astype(np.int32) if all_ring else None,
        params=params,
        hosts_forward=not single_direct,
    )


def _preimage(target: float, forward, guess: float) -> float:
    """The double x nearest ``guess`` with forward(x) == target exactly, when one lies within
    a few ulps (else ``guess``): the table's Gb/s and us must give the custom builder the
    fabric's bytes/s and seconds to the bit (b * 8 / 1e9 back through * 1e9 / 8 was an ulp off
    for 1 random rate in 40). The builder's conversion cannot give every double: then the
    nearest (about 1 binary integer GB/s in 20, e.g. 15 * 2^30 B/s, is 1 ulp off)."""
    if forward(guess) == target:
        return guess
    up = down = guess
    for _ in range(8):
        up, down = np.nextafter(up, np.inf), np.nextafter(down, -np.inf)
        for x in (float(up), float(down)):
            if forward(x) == target:
                return x
    return guess


def to_custom_table(topology: Topology) -> dict:
    """The scenario ``[topology]`` table (kind = "custom") of a fabric: hosts, switches,
    links = [[u, v, gbps, latency_us], ...], hosts_forward; built, it is this fabric bit for
    bit (link rates and latencies as the custom builder converts them: topo.topology gbps, us)."""
    from topo.topology import gbps as to_bytes, us as to_seconds

    t = topology
    p = t.params or {}
    layer_guess = {}  # an imported network.yml: the file's figures, so the table reads 0.5
    if t.kind == "astra" and "latency_ns" in p:
        layer_guess = {d: (gbs * p["gb_bytes"] * 8 / 1e9, ns / 1e3) for d, (gbs, ns)
                       in enumerate(zip(p["bandwidth_GBps"], p["latency_ns"]))}
    memo: dict = {}

    def conv(b: float, l: float, d: int):
        if (b, l, d) not in memo:
            g, u = layer_guess.get(d, (b * 8 / 1e9, l * 1e6))
            memo[b, l, d] = (_preimage(b, to_bytes, g), _preimage(l, to_seconds, u))
        return memo[b, l, d]

    return {
        "kind": "custom", "hosts": int(t.n_hosts), "switches": int(t.n_switches),
        "hosts_forward": bool(t.hosts_forward),
        "links": [[int(u), int(v), *conv(b, l, d)]
                  for u, v, b, l, d in zip(t.link_u.tolist(), t.link_v.tolist(),
                                           t.link_bw.tolist(), t.link_lat.tolist(),
                                           t.link_layer.tolist())],
    }
