"""netcore: the engines (flow-level and packet-level) and the Schedule they consume."""
from netcore.api import simulate
from netcore.result import Result
from netcore.schedule import COMPUTE, DELAY, TRANSFER, Schedule, ScheduleBuilder, ScheduleError

__all__ = ["simulate", "Result", "Schedule", "ScheduleBuilder", "ScheduleError",
           "TRANSFER", "COMPUTE", "DELAY"]
