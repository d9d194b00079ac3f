"""Validation against ns-3 and published measurements."""
