"""Write a netcosim fabric for other tools: GraphML (networkx, Gephi, yEd) and JSON.

Both formats come from ``topo/io.py`` (the builders' own save/load), so there is one
definition of each: the JSON is the ``netcosim-topology/1`` document that ``topo.io.load_json``
reads back bit-exactly, the GraphML has node ``kind`` ("host"/"switch") and ``host_group``,
edge ``bw`` (bytes/s per direction), ``latency`` (s), ``layer`` and ``index`` (the physical
link id), and the scalar builder parameters as graph attributes.
A Schedule is written as a Chakra trace by ``netcosim.interop.chakra_writer.write_schedule``.
"""
from __future__ import annotations

from pathlib import Path

from topo.errors import InputError


def _target(path, what: str) -> Path:
    p = Path(path)
    if p.is_dir():
        raise InputError(f"--{what} {str(path)!r}: is a directory, expected a file name")
    if not p.parent.exists():
        raise InputError(f"--{what} {str(path)!r}: folder {str(p.parent)!r} does not exist")
    return p


def write_graphml(topology, path) -> Path:
    from topo import io

    p = _target(path, "graphml")
    io.to_graphml(topology, p, where="--graphml")
    return p


def write_json(topology, path) -> Path:
    from topo import io

    p = _target(path, "json")
    io.save_json(topology, p, where="--json")
    return p
