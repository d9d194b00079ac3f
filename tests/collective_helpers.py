"""Options each collective algorithm needs to be built over n ranks (shared by the checker's
tests and the metamorphic tests)."""
import collectives as co
from topo.builders import build

# fabrics whose switches reduce: one NVLink node of 20 GPUs, a fat-tree of 54 hosts
NODE = build("two_tier", {"nodes": 1, "gpus_per_node": 20, "reduce_gbps": "line"})
FAT_TREE = build("fat_tree", {"k": 6, "reduce_gbps": "line"})


def options_for(op, algo, n):
    """Options an algorithm needs for n ranks, or None when it cannot take n."""
    if algo == "hierarchical":
        gs = [g for g in (2, 3, 4) if n % g == 0 and g < n]
        return {"group_size": gs[-1]} if gs else None
    if algo == "torus":
        f = [d for d in range(2, n) if n % d == 0]
        return {"dims": (f[0], n // f[0]) if f else (n,)}
    if algo in co.IN_NETWORK:  # the switches reduce: a fabric whose switches can
        return {"fabric": NODE if algo == "nvls" else FAT_TREE}
    if algo == "nvls_tree":  # nodes of g GPUs whose switches reduce (ranks from 0 or 10)
        gs = [g for g in (2, 3) if n % g == 0 and g < n]
        if not gs:
            return None
        fab = build("two_tier", {"nodes": (n + 16) // gs[0] + 1, "gpus_per_node": gs[0],
                                 "reduce_gbps": "line"})
        return {"group_size": gs[0], "fabric": fab}
    return {}
