"""The discrete-event layer under every timed model: the simulated clock (absolute times, the order
of events at one instant), a one-transmitter band, a server's inbox, the phases an upload goes
through, and the garbage collector's pace during a run (``collector``). Knows nothing of radio or
learning."""
from .band import Band
from .clock import CHECKPOINT, RANK_AVAILABILITY, RANK_DEVICE, RANK_STOP, RANK_TIMER, Clock, priority
from .inbox import Inbox
from .phases import ARRIVED, COMPUTE, DOWNLINK, FINISHED, FORWARDING, ON_AIR, QUEUED, WAITING

__all__ = ["ARRIVED", "Band", "CHECKPOINT", "COMPUTE", "Clock", "DOWNLINK", "FINISHED", "FORWARDING", "Inbox",
           "ON_AIR", "QUEUED", "RANK_AVAILABILITY", "RANK_DEVICE", "RANK_STOP", "RANK_TIMER", "WAITING", "priority"]
