"""The flow-level engine: max-min fair fluid flows over a Schedule DAG, with link faults.

``netcore.flow.engine.run`` is the engine entry point used by ``netcore.simulate``.
"""
from netcore.flow.options import check_options

__all__ = ["check_options"]
