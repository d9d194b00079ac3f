"""Print the ns-3 attribute defaults that matter for matching the packet engine's `tcp`.

`python -m validation.ns3.defaults` reads them from the installed ns-3 itself (TypeId
introspection), so docs/ns3.md can be checked against the library actually used.
"""
from __future__ import annotations

WATCH = {
    "ns3::TcpSocket": None,
    "ns3::TcpSocketBase": ("MaxSegLifetime", "MaxWindowSize", "WindowScaling", "Sack",
                           "Timestamp", "MinRto", "ClockGranularity", "ReTxThreshold",
                           "LimitedTransmit", "UseEcn", "UseAbe", "Pacing"),
    "ns3::TcpL4Protocol": ("RttEstimatorType", "SocketType", "RecoveryType"),
    "ns3::RttMeanDeviation": None,
    "ns3::PointToPointNetDevice": ("Mtu", "DataRate", "InterframeGap", "TxQueue"),
    "ns3::PointToPointChannel": ("Delay",),
    "ns3::DropTailQueue<Packet>": ("MaxSize",),
    "ns3::Ipv4L3Protocol": ("DefaultTtl", "StrongEndSystemModel"),
}


def collect() -> dict:
    from validation.ns3 import binding

    ns, _ = binding.load()
    out = {}
    for name, keys in WATCH.items():
        tid = ns.TypeId.LookupByName(name)
        rows = {}
        for i in range(tid.GetAttributeN()):
            a = tid.GetAttribute(i)
            if keys is None or a.name in keys:
                try:
                    rows[str(a.name)] = str(a.initialValue.SerializeToString(a.checker))
                except Exception:  # some attribute values cannot be printed
                    rows[str(a.name)] = "?"
        out[name] = rows
    return out


if __name__ == "__main__":
    for name, rows in collect().items():
        print(name)
        for k, v in rows.items():
            print(f"  {k} = {v}")
