"""Save and load fabrics as JSON, export GraphML.

The JSON is the scenario contract for ``kind = "custom"`` (``hosts``, ``switches``,
``links = [[u, v, gbps, latency_us], ...]``) plus what a builder knew: ``kind``,
``params``, ``layer_names`` / ``link_layer``, ``host_group``, ``coords``, ``hosts_forward``,
and the exact per-link ``link_bw_Bps`` / ``link_lat_s`` (so a round trip is bit-exact; Gbps
and microseconds are not always exactly representable after conversion). A hand-written file
with only the contract keys loads through ``topo.builders.custom``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from topo.errors import InputError
from topo.topology import Topology

FORMAT = "netcosim-topology/1"


def _plain(x):
    """JSON-ready copy of params (numpy scalars/arrays and tuples become lists/numbers)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _tuples(x):
    """Inverse of _plain for params: lists come back as tuples (builders store dims etc. as
    tuples)."""
    if isinstance(x, dict):
        return {k: _tuples(v) for k, v in x.items()}
    if isinstance(x, list):
        return tuple(_tuples(v) for v in x)
    return x


def to_dict(topology: Topology) -> dict:
    t = topology
    return {
        "format": FORMAT,
        "kind": t.kind,
        "hosts": t.n_hosts,
        "switches": t.n_switches,
        "links": [[int(u), int(v), float(b) * 8 / 1e9, float(l) * 1e6] for u, v, b, l in
                  zip(t.link_u, t.link_v, t.link_bw, t.link_lat)],
        "link_bw_Bps": t.link_bw.tolist(),
        "link_lat_s": t.link_lat.tolist(),
        "layer_names": list(t.layer_names),
        "link_layer": t.link_layer.tolist(),
        "host_group": t.host_group.tolist(),
        "coords": None if t.coords is None else np.asarray(t.coords).tolist(),
        "hosts_forward": bool(t.hosts_forward),
        "params": _plain(t.params),
    }


def from_dict(d: dict, where: str = "topology") -> Topology:
    if not isinstance(d, dict):
        raise InputError(f"{where} = {d!r}: expected a JSON object")
    if "format" not in d:  # a plain custom-contract file
        from topo.builders import build

        body = {k: v for k, v in d.items() if k != "kind"}
        if d.get("kind", "custom") != "custom":
            raise InputError(f"{where}.kind = {d.get('kind')!r}: a topology JSON without "
                             f"'format' must be a custom fabric (hosts, switches, links)")
        return build("custom", body, where)
    if d["format"] != FORMAT:
        raise InputError(f"{where}.format = {d['format']!r}: expected {FORMAT!r}")
    # counts and kinds as written, not coerced: int(true) made 1 host, int("2") 2
    from topo.builders._check import as_int

    for key, lo in (("hosts", 1), ("switches", 0)):
        if key in d:
            as_int(d[key], f"{where}.{key}", lo=lo)
    if "kind" in d and not isinstance(d["kind"], str):
        raise InputError(f"{where}.kind = {d['kind']!r}: expected a name")
    if not isinstance(d.get("layer_names", []), list):  # a string became its letters
        raise InputError(f"{where}.layer_names = {d['layer_names']!r}: expected a list of "
                         f"names")
    if not isinstance(d.get("params", {}), dict):
        raise InputError(f"{where}.params = {d['params']!r}: expected an object")
    for key in ("bisection_Bps", "diameter_hops"):  # figures topo.metrics reports as given
        v = d.get("params", {}).get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or
                              not v >= 0 or (key == "diameter_hops" and v != int(v))):
            raise InputError(f"{where}.params.{key} = {v!r}: expected a number >= 0")
    try:
        links = np.asarray(d["links"], dtype=np.float64).reshape(-1, 4)
        bw = np.asarray(d.get("link_bw_Bps", links[:, 2] * 1e9 / 8), dtype=np.float64)
        lat = np.asarray(d.get("link_lat_s", links[:, 3] * 1e-6), dtype=np.float64)
        return Topology(
            d["kind"], int(d["hosts"]), int(d["switches"]), links[:, 0], links[:, 1], bw, lat,
            np.asarray(d.get("link_layer", np.zeros(len(links), dtype=np.int8))),
            tuple(d.get("layer_names", ("edge",))),
            host_group=None if d.get("host_group") is None else np.asarray(d["host_group"]),
            coords=None if d.get("coords") is None else np.asarray(d["coords"]),
            params=_tuples(d.get("params", {})),
            hosts_forward=d.get("hosts_forward"))
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, InputError):
            raise
        raise InputError(f"{where}: malformed topology JSON ({type(e).__name__}: {e})") from None


def _write_error(e: OSError, path, where: str) -> InputError:
    return InputError(f"{where} = {str(path)!r}: cannot write the file "
                      f"({e.strerror or type(e).__name__})")


def save_json(topology: Topology, path, where: str = "path") -> None:
    text = json.dumps(to_dict(topology))
    try:
        Path(path).write_text(text)
    except OSError as e:  # missing folder, read-only file system, permissions
        raise _write_error(e, path, where) from None


def load_json(path, where: str = "topology") -> Topology:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"{where}: cannot read {str(path)!r}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{where}: {str(path)!r} is not UTF-8 text (byte {e.start})") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{where}: {str(path)!r} is not valid JSON ({e})") from None
    except RecursionError:
        raise InputError(f"{where}: {str(path)!r} is nested too deeply") from None
    return from_dict(d, where)


def to_graphml(topology: Topology, path, where: str = "path") -> None:
    """GraphML for Gephi/yEd/networkx: node ``kind`` and ``host_group`` (hosts), edge ``bw``
    (bytes/s), ``latency`` (s), ``layer``; graph attributes are the scalar params."""
    import networkx as nx

    g = topology.graph.copy()
    for h in range(topology.n_hosts):
        g.nodes[h]["host_group"] = int(topology.host_group[h])
    if topology.coords is not None:
        for i, c in enumerate(np.asarray(topology.coords)):
            g.nodes[i]["coords"] = ",".join(str(int(x)) for x in c)
    try:
        nx.write_graphml(g, str(path))
    except OSError as e:  # missing folder, read-only file system, permissions
        raise _write_error(e, path, where) from None
