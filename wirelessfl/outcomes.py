"""How an update ended: the ``outcome`` column of updates.csv and the keys of summary.json's ``outcomes``.

:class:`Outcome` is a ``str`` enum whose values are the strings the records have always held, so a
record written with it is byte-identical to one written with the bare strings, and an outcome still
equals its string (``Outcome.APPLIED == "applied"``, also as a dict key). What the names buy is that
a misspelt outcome is an AttributeError where it is written, not a new column value in a record.

This module is at the bottom of the package: it imports nothing of it (access schemes, the battery
and the engines all name outcomes).
"""
from __future__ import annotations

from enum import Enum

__all__ = ["LOSSES", "OUTCOMES", "Outcome"]


class Outcome(str, Enum):
    """The fate of one dispatched update (docs: wirelessfl.sim.records.update_log.UPDATE_COLUMNS)."""

    APPLIED = "applied"
    """It reached the server and was aggregated."""
    STALE = "stale"
    """It arrived older than the protocol's max_staleness and was dropped."""
    LATE_DROPPED = "late_dropped"
    """It missed its round's deadline (or its first k) under late = "drop"."""
    OFFLINE = "offline"
    """Its device left while computing or uploading."""
    LOST = "lost"
    """A packet failed link.max_attempts times."""
    SILENT = "silent"
    """It did not send (aircomp's truncation, no usable rate)."""
    BATTERY = "battery"
    """Its device's battery ran out during the task."""
    DOWNLINK = "downlink"
    """It missed the model and waited for the next one (link.downlink_miss = "wait")."""
    HANDOVER = "handover"
    """Its device handed over while it waited for or was on the uplink (network.handover_upload = "lose")."""
    IN_FLIGHT = "in_flight"
    """The run ended first."""

    # the record's string, wherever it is formatted ("%s", f-strings, str(), format())
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    # Enum hashes by name; an outcome must find its string's entry in a dict (summary.json's counts)
    __hash__ = str.__hash__


OUTCOMES = tuple(o.value for o in Outcome)
"""Every outcome's string, in the order summary.json lists them."""

LOSSES = (Outcome.OFFLINE, Outcome.LOST, Outcome.SILENT, Outcome.BATTERY, Outcome.DOWNLINK, Outcome.HANDOVER)
"""Outcomes of an update its device never delivered: the protocol hears of each (``on_lost``)."""
