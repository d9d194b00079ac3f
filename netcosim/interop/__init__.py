"""Interoperability: Chakra execution traces in and out, ASTRA-sim network configs in, fabric
export (GraphML / JSON). docs/interop.md is the user reference.

* ``chakra_reader``: per-rank Chakra ET files -> protobuf records (``read_trace``);
* ``chakra_to_schedule``: records -> one Schedule (``to_schedule``, ``load_schedule``);
* ``chakra_writer``: a Schedule -> per-rank Chakra files (``write_schedule``);
* ``astra_network``: ASTRA-sim analytical ``network.yml`` -> Topology (``load_network``);
* ``export``: Topology -> GraphML and JSON (``write_graphml``, ``write_json``);
* ``workload``: the ``[workload] kind = "chakra"`` scenario kind.

Submodules are imported on use: the protobuf runtime is only needed for Chakra.
"""
