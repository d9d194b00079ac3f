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


def _target(path, what: str) -> Path:
    from netcosim.outpaths import check_file

    return check_file(path, f"--{what} {str(path)!r}")


def write_graphml(topology, path) -> Path:
    from netcosim.outpaths import write_file
    from topo import io

    p = _target(path, "graphml")
    return write_file(p, f"--graphml {str(path)!r}",
                      lambda tmp: io.to_graphml(topology, tmp, where="--graphml"))


def write_json(topology, path) -> Path:
    from netcosim.outpaths import write_file
    from topo import io

    p = _target(path, "json")
    return write_file(p, f"--json {str(path)!r}",
                      lambda tmp: io.save_json(topology, tmp, where="--json"))
