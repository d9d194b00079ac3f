"""LLM serving: request streams, fabric cost curves, the batching loop, metrics (docs/inference.md)."""
