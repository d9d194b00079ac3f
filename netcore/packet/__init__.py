"""Packet-level engine: a compiled discrete-event core (netcore/_packet_cpp) with port
queues, TCP NewReno / DCTCP / DCQCN+PFC / ideal transports and faults."""
from netcore.packet.engine import run
from netcore.packet.incremental import PacketIncremental
from netcore.packet.options import DEFAULTS, TRANSPORTS, check_options

__all__ = ["run", "check_options", "DEFAULTS", "TRANSPORTS", "PacketIncremental"]
