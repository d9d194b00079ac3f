"""Research: a flow-level TCP model with FIFO queues (see model.py and docs/ns3.md)."""
