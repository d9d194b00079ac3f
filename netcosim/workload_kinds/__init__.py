"""Workload kinds contributed by other packages (training, chakra, ...).

Every module here that defines ``register(register_workload)`` is imported the first time a
workload kind is looked up; it calls ``register_workload(kind, builder, keys, report=None)``
(see netcosim/workloads.py for the signatures)."""
