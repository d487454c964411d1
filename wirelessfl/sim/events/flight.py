"""What the event engine keeps of a dispatched device (:class:`Update`, one row of updates.csv
in the end) and of a round of a round-based protocol (:class:`Round`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...access import UplinkFacts, uplink_facts
from ...des.phases import ARRIVED, COMPUTE, DOWNLINK, FINISHED, FORWARDING, ON_AIR, QUEUED, WAITING
from ...scheduling.base import Decision

__all__ = ["ARRIVED", "COMPUTE", "DOWNLINK", "FINISHED", "FORWARDING", "ON_AIR", "QUEUED", "Round", "Update", "WAITING"]


class Update:
    """One dispatched device, from its dispatch to its update's fate (an updates.csv row).

    seq: dispatch number; version: the server version it started from; key: the key of its
    minibatch and work draws; round: its round (round-based protocols; else its version);
    share: its weight as a carried update (1 / distinct devices of its round); q: its inclusion
    probability (NaN when dispatched, not drawn). Times in simulated seconds (NaN: not yet).
    """

    __slots__ = ("seq", "device", "version", "key", "round", "share", "q", "dispatch_s", "compute_start_s",
                 "compute_s", "compute_end_s", "power", "bits", "gain", "airtime_s", "tx_start_s", "tx_end_s",
                 "phase", "queue_seq", "bits_left", "compute_energy_full_j", "energy_j", "compute_energy_j",
                 "outcome", "version_applied", "lost_s", "report", "attempts", "packet", "tries", "attempt_start_s",
                 "attempt_end_s", "attempt_ok", "round_gain", "downlink_s", "downlink_attempts", "received",
                 "air_before_s", "model_at_site_s", "at_cloud_s", "mcs", "harq_tx", "delta", "start", "process", "done")
    SAVED = __slots__[:-4]  # the rest is rebuilt (delta and start are saved as tensors separately)

    def __init__(self, seq=-1, device=-1, version=0, key=0, round=0, share=math.nan, q=math.nan,
                 dispatch_s=math.nan, compute_start_s=math.nan, compute_s=math.nan, compute_end_s=math.nan,
                 power=math.nan, bits=math.nan, gain=math.nan, airtime_s=math.nan, tx_start_s=math.nan,
                 tx_end_s=math.nan, phase=DOWNLINK, queue_seq=-1, bits_left=math.nan,
                 compute_energy_full_j=math.nan, energy_j=math.nan, compute_energy_j=math.nan, outcome="",
                 version_applied=-1, lost_s=math.nan, report=False, round_gain=False):
        # one assignment each: an update is made for every dispatch
        self.seq, self.device, self.version, self.key, self.round = seq, device, version, key, round
        self.share, self.q, self.dispatch_s, self.compute_start_s = share, q, dispatch_s, compute_start_s
        self.compute_s, self.compute_end_s, self.power, self.bits = compute_s, compute_end_s, power, bits
        self.gain, self.airtime_s, self.tx_start_s, self.tx_end_s = gain, airtime_s, tx_start_s, tx_end_s
        self.phase, self.queue_seq, self.bits_left = phase, queue_seq, bits_left
        self.compute_energy_full_j, self.energy_j, self.compute_energy_j = \
            compute_energy_full_j, energy_j, compute_energy_j
        self.outcome, self.version_applied, self.lost_s = outcome, version_applied, lost_s
        self.report = report  # an upload before the round's computation (a probe's report), not a model
        # packets (link.packet_bits, link.errors): transmissions so far, the packet being sent and its
        # tries, the transmission under way; round_gain: every transmission at the round's gain
        self.attempts, self.packet, self.tries = 0, 0, 0
        self.attempt_start_s = self.attempt_end_s = math.nan
        self.attempt_ok, self.round_gain = False, round_gain
        # the model's way down (link.downlink): seconds until it arrived (or the last try missed), tries, got it
        self.downlink_s, self.downlink_attempts, self.received = math.nan, 1, True
        self.air_before_s = 0.0  # time on the air of transmissions a handover restarted (their energy counts)
        # one server in the cloud behind a timed backhaul: when the model was at the device's site, and
        # when the update reached the cloud (NaN: no backhaul)
        self.model_at_site_s = self.at_cloud_s = math.nan
        self.mcs, self.harq_tx = -1, 0  # an MCS rate (link.rate): the upload's MCS and transport-block transmissions
        self.delta = self.start = self.process = self.done = None

    @property
    def in_flight(self) -> bool:
        """On its way to the server (computing, uploading or on the backhaul; not arrived, not lost)."""
        return self.phase < ARRIVED

    @property
    def at_device(self) -> bool:
        """Still with its device (computing or uploading): its device leaving loses it."""
        return self.phase < FORWARDING

    def __repr__(self) -> str:
        return f"Update(seq={self.seq}, device={self.device}, version={self.version}, phase={self.phase})"


@dataclass
class Round:
    """A round of a round-based protocol: its decision and the updates it dispatched."""

    index: int
    t_start: float
    compute_start_s: float
    decision: Decision | None
    selected: np.ndarray
    gains: np.ndarray
    available: np.ndarray | None
    comp: np.ndarray
    updates: list
    server_s: float = 0.0  # a server round's duration (no device takes part)
    reports_left: int = 0  # uploads before the computation still under way
    reports_s: float = 0.0  # how long they took (sync's pre-upload phase)
    reports_energy: list = field(default_factory=list)  # transmit energy of each report
    piggy_s: float = 0.0   # airtime of the bits riding on the model uploads
    computing: Any = None  # the event the round's devices wait on while the reports go up (not saved)


def arrived_facts(updates: list[Update], access) -> UplinkFacts:
    """The uplink's facts, as the access scheme states them, for updates that all arrived (an event
    aggregation's inputs)."""
    return uplink_facts(access, np.array([u.device for u in updates], dtype=np.int64),
                        np.array([u.gain for u in updates]), np.array([u.power for u in updates]),
                        np.ones(len(updates), dtype=bool))
