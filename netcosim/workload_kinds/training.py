"""``[workload] kind = "training"`` comes from compute/ (compute/workload.py)."""
from compute.workload import register  # noqa: F401
