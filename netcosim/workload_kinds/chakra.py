"""``[workload] kind = "chakra"`` comes from netcosim/interop (netcosim/interop/workload.py)."""
from netcosim.interop.workload import register  # noqa: F401
