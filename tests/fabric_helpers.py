"""Fabric look-ups the fault tests share."""
import numpy as np


def scaleout_link(fab, host) -> list[int]:
    """[u, v] of the first scale-out (``edge`` layer) link of ``host``: its NIC's link."""
    ly = fab.layer_names.index("edge")
    i = np.flatnonzero((fab.link_layer == ly) & ((fab.link_u == host) | (fab.link_v == host)))
    return [int(fab.link_u[i[0]]), int(fab.link_v[i[0]])]
