"""topo: fabrics as data, their builders, routing and link faults."""
from topo.faults import LinkFaults, random_failures
from topo.topology import Topology, TopologyError, gbps, us

__all__ = ["Topology", "TopologyError", "LinkFaults", "random_failures", "gbps", "us"]
