"""The contract of an access scheme, with both of its timing models: the closed form of a sync
round (``airtime_s``, ``schedule``) and the event uplink the event protocols' devices contend for
(``event_uplink``), plus what an event uplink may use of the engine that runs it (:class:`UplinkHost`)
and the capabilities only some schemes have.

Which engine needs which member (as pymanopt says which solver needs which method):

- both engines: ``from_scenario`` (required); ``link`` (set by ``AccessScheme.__init__(link)``);
  ``airtime_s`` (required: under sync every selected device's, under the event protocols one
  upload's through ``upload_s``); ``check``, ``pricing``, ``on_air_s``, ``round_info``,
  ``state_dict``, ``load_state`` (defaults: see each).
- sync only: ``schedule`` (required), the round's uplink in closed form; ``send_packets`` and
  ``report_waits`` (defaults from ``solo_uploads`` and ``concurrent``: the engine reads no flag).
- event rounds (semi_sync): ``round_airtime_s`` (default from ``concurrent``).
- event protocols only: ``event_uplink`` (default: one transmitter, ``tdma.OneTransmitter``, or
  the band shared at ``rates_bps``, ``fdma.SharedBand``, for a ``concurrent`` scheme);
  ``upload_s`` (default: ``airtime_s`` of one device, so an override of ``airtime_s`` serves both
  engines); ``rates_bps`` and ``share_snrs`` for a shared band (defaults: 1 / ``airtime_s`` of one
  bit; the SINR at which an equal share carries that rate; a sync round's packets on a shared band
  ask them too).

Capabilities, each a Protocol below that a scheme has by writing its members (or by naming it among
its bases), asked with ``provides(scheme, Capability)``. For the first four a function of this
module, named as the member, asks the scheme that has it and gives the default for one that has
not, so that a caller asks in one line:

- ``SetsTransmitPower`` (``transmit_power``; rounds, and the Lyapunov rules' pricing): aircomp's
  channel inversion; without it, the scheduler's power (:func:`transmit_power`).
- ``AddsUplinkNoise`` (``uplink_facts``; both engines, training runs): aircomp's noise on the sum;
  without it the updates arrive exactly (:func:`uplink_facts`).
- ``UploadsOnASubBand`` (``upload_link``; packets and fading within an upload): dedicated's
  sub-band; without it the whole band (:func:`upload_link`).
- ``DrawsBlockFading`` (``block_fading``; a shared band's rates): ofdma's block factors; without it
  nothing is drawn (:func:`block_fading`).
- ``AddsUploadColumns`` (``upload_columns``, ``round_counts``, ``take_counts``; updates.csv): wifi,
  ns3_wifi, orbit.
- ``ResolvesSlots`` (``resolve``; sync): aloha. ``ListensWhileContending`` (``listening_s``; both,
  with batteries): wifi. ``TimesEachDevice`` (``schedule_devices``; sync): orbit.
  ``WritesRunFiles`` (``run_files``): orbit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Protocol, runtime_checkable

import numpy as np

from ..capabilities import provides
from .link import Link
from .packets import send_shared, send_solo

if TYPE_CHECKING:
    from ..des import Clock

__all__ = ["AccessScheme", "AddsUploadColumns", "AddsUplinkNoise", "AirtimePrice", "DrawsBlockFading", "EventUplink",
           "ListensWhileContending", "ResolvesSlots", "SetsTransmitPower", "TimesEachDevice", "UploadsOnASubBand",
           "UplinkFacts", "UplinkHost", "UplinkSchedule", "WritesRunFiles", "block_fading", "transmit_power",
           "upload_link", "uplink_facts"]


@dataclass
class UplinkSchedule:
    """What happened on the uplink in one round's computation-and-upload phase.

    order: indices into the selected devices, in the order their uploads started; tx_start: when
    each one's upload started (nan: it never started); arrived: its upload was complete by the
    deadline; end_s: when the phase ended (the last upload, or the deadline if one was missed);
    tx_end: when each upload ended, where that is not tx_start + airtime (slots across a guard);
    None: it is. on_air_s and attempts: each device's time actually on the air and its
    transmissions, where contention decides them (random access); None: its airtime, and one.
    """

    order: np.ndarray
    tx_start: np.ndarray
    arrived: np.ndarray
    end_s: float
    tx_end: np.ndarray | None = None
    on_air_s: np.ndarray | None = None
    attempts: np.ndarray | None = None


@dataclass(frozen=True)
class UplinkFacts:
    """What the uplink did for the updates of one aggregation (an algorithm that HearsTheUplink
    receives it in ``uplink``): devices (k,); gains |h|^2 (k,) each upload's first gain; power (k,);
    arrived (k,) whether the update reached the server; noise_var, the variance of the noise the
    channel adds to each entry of the aggregate, in units of the updates' mean power per entry (0:
    the updates arrive exactly; ``aircomp``: 1 / (K^2 SNR) over K devices at receive SNR rho0 / N0).
    The trainer adds that noise to the next aggregate (wirelessfl.learning.trainer.Trainer.aggregate)."""

    devices: np.ndarray
    gains: np.ndarray
    power: np.ndarray
    arrived: np.ndarray
    noise_var: float = 0.0


@dataclass(frozen=True)
class AirtimePrice:
    """How a scheduler prices one upload's airtime under an access scheme: as
    bits / (bandwidth_hz log2(1 + g P / noise_power)), the form whose cost the Lambert-W power rule
    minimises, or, when ``fixed_s`` is set, as fixed_s for every device that sends (P > 0)."""

    bandwidth_hz: float
    noise_power: float
    fixed_s: float | None = None


@runtime_checkable
class UplinkHost(Protocol):
    """What an event uplink may use of the engine that runs it, and nothing more.

    An update ``u`` (wirelessfl.sim.events.flight.Update) carries the upload's facts: ``device``, ``seq``
    (its dispatch number, for event priorities), ``bits``, ``gain`` (NaN until drawn), ``power``,
    ``phase`` (wirelessfl.des.phases), ``tx_start_s``, ``tx_end_s``, ``airtime_s`` (time on the
    air), ``attempts``, and scratch fields an uplink may keep its progress in so that a checkpoint
    saves it: ``bits_left``, ``packet``, ``tries``, ``attempt_start_s``, ``attempt_end_s``,
    ``attempt_ok``, ``queue_seq``; ``done`` is an event slot the uplink may use (not saved)."""

    env: Clock
    """The SimPy environment, with ``at(time, priority)`` for events at an absolute time."""
    packets_on: bool
    """Uploads go in packets that may fail (link.packet_bits, link.rate_bps, link.errors)."""
    per_aggregation: float
    """How many updates the protocol aggregates at once (FedBuff's K, 1 for FedAsync, semi_sync's
    first k): over-the-air aggregation gathers that many."""
    link_rng: np.random.Generator
    """The "link" random stream: packet errors."""

    def start_transmission(self, u) -> None:
        """``u`` goes on the air now: its tx_start_s, its gain (drawn now unless its round drew it)
        and its airtime_s from the scheme's ``upload_s`` (NaN: the uplink decides as it goes)."""

    def draw_gain(self, device: int) -> float:
        """A fresh gain of ``device`` at this moment (a retransmission's channel)."""

    def next_queue_place(self) -> int:
        """A place in the uplink's queue (a resume rebuilds the processes in this order)."""

    def update(self, seq: int):
        """The update in flight with dispatch number ``seq`` (an uplink's ``load_state``)."""

    def in_flight(self) -> Iterable:
        """The updates still computing or uploading, in dispatch order."""

    def transmitted(self, u, seconds: float) -> None:
        """A scheme that listens while contending (:class:`ListensWhileContending`): ``u`` sends for
        ``seconds`` from now (its battery pays the frame)."""


@runtime_checkable
class EventUplink(Protocol):
    """The uplink the devices in flight contend for under the event protocols (one per run, made by
    ``AccessScheme.event_uplink(host)``).

    ``transmit(u)`` is a SimPy generator the device's process runs once its computation is done: it
    sets ``u.phase`` (QUEUED while it waits, ON_AIR once it sends; ``wirelessfl.access.link.queue``
    and ``host.start_transmission`` do both), sets ``u.tx_end_s`` and ``u.airtime_s`` when the upload
    is over, and returns True (arrived), False (lost: a packet failed every try) or an outcome
    (``wirelessfl.outcomes.Outcome``, e.g. ``Outcome.SILENT``; its plain string, "silent", still works). It may be interrupted (``simpy.Interrupt``: the device went offline, or a
    deadline dropped it): it must then let go of what it holds and re-raise. ``state_dict`` and
    ``load_state`` save and restore what it keeps besides the updates' own fields (a resume
    recreates the processes in the order they held or asked for the uplink, then calls
    ``load_state``). Optional: ``on_air_until(u, t)``, the time on the air of an upload stopped at
    ``t`` (default: ``t - u.tx_start_s``, a channel held from the start; ALOHA: its transmissions)."""

    def transmit(self, u): ...

    def state_dict(self) -> dict: ...

    def load_state(self, state: dict) -> None: ...


@runtime_checkable
class ResolvesSlots(Protocol):
    """A random-access scheme whose slots are settled by ``resolve(received_w, devices)``: the
    contenders' received powers (gain x power) and device ids in, the positions that transmit and
    the one whose packet gets through (or None) out (wirelessfl.access.aloha.Aloha.resolve). The sync
    engine hands such a scheme's ``schedule`` the round's ``received_w`` and ``devices``."""

    def resolve(self, received_w: np.ndarray, devices: np.ndarray) -> tuple[list[int], int | None]: ...


@runtime_checkable
class ListensWhileContending(Protocol):
    """A contention scheme that times each of its devices' frames (wirelessfl.access.wifi.Wifi): while
    an upload contends its device listens, at the batteries' receiving power, and each transmission
    is paid at its power as it goes (``UplinkHost.transmitted``); batteries then run under it. The
    sync engine pays a round's listening after the scheme's schedule, ``listening_s`` of each
    upload; the event engine as each upload contends."""

    def listening_s(self, tx_start: np.ndarray, tx_end: np.ndarray, airtime_s: np.ndarray) -> np.ndarray:
        """Each upload's time listening: from its first contention (``tx_start``) to its last ACK
        (``tx_end``), less its own frames' ``airtime_s``; 0 for one that never contended (NaN)."""


@runtime_checkable
class TimesEachDevice(Protocol):
    """A scheme that times a sync round's uploads device by device itself, from when each is ready
    (satellite passes: wirelessfl.access.orbit); the sync engine then asks it instead of ``schedule``."""

    def schedule_devices(self, devices: np.ndarray, ready_s: np.ndarray, bits,
                         deadline_s: float | None = None) -> UplinkSchedule: ...


@runtime_checkable
class WritesRunFiles(Protocol):
    """A scheme with files of its own for the run folder (an orbit run's passes.csv), written as the run
    starts: ``run_files()`` gives {name: text}; each name must be in the runner's WRITES."""

    def run_files(self) -> dict[str, str]: ...


@runtime_checkable
class SetsTransmitPower(Protocol):
    """A scheme that decides the power each device of a round really transmits at, from its gain and
    the scheduler's power (aircomp: truncated channel inversion). Without it a device sends at the
    scheduler's power (:func:`transmit_power`)."""

    def transmit_power(self, gain: np.ndarray, power: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class AddsUplinkNoise(Protocol):
    """A scheme whose uplink adds noise to what the server receives (aircomp: the sum of the updates
    over the air): ``uplink_facts`` states what the uplink did for one aggregation, its ``noise_var``
    among it. Without it the updates arrive exactly (:func:`uplink_facts`)."""

    def uplink_facts(self, devices: np.ndarray, gains: np.ndarray, power: np.ndarray,
                     arrived: np.ndarray) -> UplinkFacts: ...


@runtime_checkable
class UploadsOnASubBand(Protocol):
    """A scheme whose uploads each go on a channel narrower than the band (dedicated: a sub-band of
    B / S Hz with noise N0 / S): ``upload_link()`` is that channel, on which packets and fading
    within an upload are modelled. Without it an upload has the whole band (:func:`upload_link`)."""

    def upload_link(self) -> Link: ...


@runtime_checkable
class DrawsBlockFading(Protocol):
    """A shared-band scheme whose uploads draw something as they go on the air for its ``rates_bps``
    (ofdma: a factor per resource block, (k, R) for k uploads; None: nothing this time). Without it
    nothing is drawn (:func:`block_fading`)."""

    def block_fading(self, k: int) -> np.ndarray | None: ...


@runtime_checkable
class AddsUploadColumns(Protocol):
    """A scheme with columns of its own in updates.csv, one number each per upload
    (``upload_columns``; wifi: collisions, frames, retries, drops; orbit: the pass's geometry): under
    sync ``round_counts()`` gives the last round's, one row per upload in the order ``schedule`` got
    them; under the event protocols ``take_counts(seq)`` those of the update with dispatch number
    ``seq`` as its row is written (forgotten once taken; zeros, or NaN, for one the scheme never saw)."""

    upload_columns: tuple[str, ...]

    def round_counts(self) -> np.ndarray: ...

    def take_counts(self, seq: int) -> tuple: ...


def transmit_power(scheme, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
    """The power each device of a round transmits at: the scheme's where it SetsTransmitPower, else
    the scheduler's ``power`` itself (the same array)."""
    return scheme.transmit_power(gain, power) if provides(scheme, SetsTransmitPower) else power


def uplink_facts(scheme, devices: np.ndarray, gains: np.ndarray, power: np.ndarray,
                 arrived: np.ndarray) -> UplinkFacts:
    """What the uplink did for one aggregation: the scheme's facts where it AddsUplinkNoise, else
    updates that arrive exactly."""
    if provides(scheme, AddsUplinkNoise):
        return scheme.uplink_facts(devices, gains, power, arrived)
    return UplinkFacts(devices, gains, power, arrived)


def upload_link(scheme) -> Link:
    """The channel one upload is sent on: the scheme's sub-band where it UploadsOnASubBand, else the
    whole band (``scheme.link``)."""
    return scheme.upload_link() if provides(scheme, UploadsOnASubBand) else scheme.link


def block_fading(scheme, k: int) -> np.ndarray | None:
    """What k uploads going on the air draw for the scheme's ``rates_bps``: its draw where it
    DrawsBlockFading, else None (nothing)."""
    return scheme.block_fading(k) if provides(scheme, DrawsBlockFading) else None


DEFAULT_UPLINKS: dict[bool, type] = {}
"""The event uplink of a scheme that brings none, by whether it is ``concurrent``; the modules that
define them fill it in (tdma.py: one transmitter; fdma.py: the shared band)."""


class AccessScheme:
    """How uploads share the uplink. Required: ``from_scenario``, ``airtime_s`` and ``schedule``,
    and ``__init__`` must set ``link`` (call ``super().__init__(link)``); subclass to inherit the
    rest (see the module docstring for which engine needs which member)."""

    Options: ClassVar[type | None] = None
    """A dataclass of the scheme's own options, or None (options handed over as a dict)."""
    concurrent: ClassVar[bool] = False
    """True: several devices send at once (a round's airtimes are decided on the air, not before);
    False: one at a time."""
    solo_uploads: ClassVar[bool] = False
    """True: an upload has a channel of its own while on the air (the whole band under tdma, its own
    sub-band under dedicated), so its time on the air follows from its own channel alone: packets are
    sent on :func:`upload_link`, and fading within an upload (channel.coherence_s, devices.speed_mps) is
    modelled on it (refused elsewhere). False (a shared band): a packet's capacity is the device's
    rate on its share, and its errors are drawn at that share's SNR (``share_snr``)."""
    over_the_air: ClassVar[bool] = False
    """True: the server receives only the sum of the updates (AirComp), never one device's update;
    an aggregation that needs them one by one (a median, Krum) cannot run over it."""
    interferes: ClassVar[bool] = False
    """True: with several cells on one sub-band (network.reuse < network.cells) its cells' uploads may
    interfere, as wirelessfl.network.interference models it: one transmitter per cell (tdma), or
    a band shared in each cell whose scheme says what each device puts into it (``emitted``) and
    what rates interference leaves (``rates_bps(..., interference)``: fdma, ofdma)."""
    contention: ClassVar[bool] = False
    """True: a device's time on the air is decided by contention as it goes (random access: slots it
    sends in, with backoff between), not known when it starts; batteries, drawn per phase of a task,
    are refused on it."""

    def __init__(self, link: Link):
        self.link = link

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "airtime_s" in cls.__dict__ and "upload_s" not in cls.__dict__:
            # the vector form was overridden and the scalar one was not: one upload's airtime is the
            # overridden form's, so the event engine honours the override too
            cls.upload_s = AccessScheme.upload_s

    @classmethod
    def from_scenario(cls, scenario, options) -> "AccessScheme":
        """Build the scheme for ``scenario`` (its [link] table) with its options."""
        raise NotImplementedError(f"{cls.__name__}.from_scenario")

    def airtime_s(self, bits, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Time on the air of each of the k = len(gain) devices that send in a round."""
        raise NotImplementedError(f"{type(self).__name__}.airtime_s")

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None) -> UplinkSchedule:
        """A sync round's uplink in closed form: device i is ready at ready_s[i] and needs airtime_s[i]."""
        raise NotImplementedError(f"{type(self).__name__}.schedule")

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this scheme."""

    def event_uplink(self, host: UplinkHost) -> EventUplink:
        """Event protocols: the SimPy uplink the devices in flight contend for (see
        :class:`EventUplink`). Default: one transmitter, first come first served, for a scheme that
        is not ``concurrent`` (:class:`~wirelessfl.access.tdma.OneTransmitter`); the band shared
        among the devices on the air at ``rates_bps`` for one that is
        (:class:`~wirelessfl.access.fdma.SharedBand`)."""
        return DEFAULT_UPLINKS[bool(self.concurrent)](host, self)

    def on_air_s(self, seconds):
        """The time a transmission of ``seconds`` holds the channel (default: those seconds; slotted
        TDMA: whole slots). Accepts a number or an array."""
        return seconds

    def send_packets(self, bits, gain: np.ndarray, power: np.ndarray, rng: np.random.Generator):
        """Sync rounds with packets that may fail: the k = len(gain) uploads at the round's gains,
        each retried per the link: (time on the air, transmissions, whether it got through, its
        (MCS, transport-block transmissions) row). Default: on a channel of its own
        (``solo_uploads``) or on the band shared at once (wirelessfl.access.packets)."""
        if self.solo_uploads:
            return send_solo(self, upload_link(self), bits, gain, power, rng)
        return send_shared(self, block_fading(self, np.size(gain)), bits, gain, power, rng)

    def report_waits(self, airtime_s: np.ndarray) -> np.ndarray:
        """Sync rounds: the waits, one after another, of the reports a scheduler asks for before the
        computation (nobody computes yet, so the uplink is theirs): each upload after the other
        (default), or all at once, the longest, on a ``concurrent`` scheme's band."""
        return np.array([airtime_s.max()]) if self.concurrent else airtime_s

    def round_airtime_s(self, bits, gain: np.ndarray, power: np.ndarray, upload_times=None) -> np.ndarray:
        """Event rounds: each selected device's time on the air as its round begins, at the round's
        gain: NaN on a ``concurrent`` scheme's band (the band decides as the uploads go); else
        ``on_air_s`` of ``upload_times()`` where given (fading within an upload: drawn only when
        asked), or ``airtime_s``."""
        if self.concurrent:
            return np.full(np.size(gain), np.nan)
        if upload_times is not None:
            return self.on_air_s(upload_times())
        return self.airtime_s(bits, gain, power)

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """Event protocols: one upload's time on the air as it starts (NaN: the event uplink
        decides as it goes, as FDMA's shared band does). Default: ``airtime_s`` of one device."""
        return float(self.airtime_s(bits, np.array([gain]), np.array([power]))[0])

    def pricing(self, bits: float, k: int) -> AirtimePrice:
        """How a scheduler prices one upload of ``bits`` when k devices send together (default: the
        whole band, as one transmitter at a time has it)."""
        return AirtimePrice(self.link.bandwidth_hz, self.link.noise_power)

    def rates_bps(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """Concurrent schemes: the rate of each of the k = len(gain) devices on the air together
        (``fading``: what they drew, :func:`block_fading`; default: 1 / airtime_s of one bit)."""
        with np.errstate(divide="ignore"):
            return 1.0 / np.asarray(self.airtime_s(1.0, gain, power), dtype=float)

    def share_snrs(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """Concurrent schemes with an MCS rate (link.rate): the SINR each of the k devices sending at
        once sees on its share (default: the SINR at which its share B / k carries its rate)."""
        from .link import share_snr

        k = max(np.size(gain), 1)
        return share_snr(self.rates_bps(gain, power, fading), self.link.bandwidth_hz / k)

    def round_info(self) -> dict[str, float]:
        """Numbers of the scheme's own (collisions, slots idle, ...) for the row of rounds.csv of each
        round or aggregation (a column each, named by its key), read as the row is written. Default:
        none."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """The scheme's memory, for checkpoints."""
        return {}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""
