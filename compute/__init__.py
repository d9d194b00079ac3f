"""compute: GPU specs, the operator cost model and the training-step generator.

Entry points: ``compute.hardware.get_gpu``, ``compute.training.build_step``,
``compute.memory.memory_per_gpu``, ``compute.report.summarize`` / ``chrome_trace``;
docs/compute.md describes the model.
"""
