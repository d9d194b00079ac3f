"""Fabrics the collective tests share."""
from topo.builders import build


def h100_nodes(nodes, g=8, nic_gbps=355):
    """``nodes`` two_tier nodes of ``g`` GPUs with NVLink as NCCL reaches it on H100 (370 GB/s,
    NVIDIA/nccl-tests issue 212) and one NIC of ``nic_gbps`` per GPU."""
    return build("two_tier", {"nodes": nodes, "gpus_per_node": g, "scaleup_gbps": 2960,
                              "nic_gbps": nic_gbps})
