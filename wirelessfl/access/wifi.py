"""Wi-Fi (``link.access = "wifi"``): the IEEE 802.11 DCF, CSMA/CA with binary exponential backoff,
on one 20 MHz channel that every device hears. Both timing models run the same DCF
(:class:`~wirelessfl.access.wifi_dcf.Dcf`): a sync round's uplink (:meth:`WiFi.schedule`, the DCF
run as a function over the round's devices) and the event uplink (:class:`~wirelessfl.access.
wifi_uplink.WifiUplink`, one SimPy event per contention round). Its numbers per standard are in
:mod:`~wirelessfl.access.wifi_phy`; Bianchi's saturation model, which the DCF reproduces, in
:mod:`~wirelessfl.access.wifi_bianchi` (docs/radio.md, Wi-Fi).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..fields import ConfigError, option
from .base import AccessScheme, AddsUploadColumns, ListensWhileContending, UplinkSchedule
from .link import Link
from .wifi_dcf import Dcf, Station
from .wifi_phy import (MAX_MSDU_BYTES, STANDARDS, FrameExchange, Mcs, WifiPhy, best_mcs, eifs_s, exchange, max_mpdus,
                       mcs_for_rate)

__all__ = ["COUNTERS", "KEPT_UPLOADS", "WiFi", "WifiOptions"]

COUNTERS = ("collisions", "frames", "retries", "drops")
KEPT_UPLOADS = 65536
"""The uploads whose tallies ``upload_counters`` keeps at most (the oldest go first)."""
"""An upload's tallies, in this order: its transmissions that collided, its frames acknowledged, its
retransmissions (transmissions of a frame after its first), its frames dropped at the retry limit."""


@dataclass(frozen=True)
class WifiOptions:
    """Options of the 802.11 DCF."""

    wifi_standard: str = option("80211ac", choices=tuple(STANDARDS),
                                doc="the PHY: 80211a (OFDM), 80211n (HT), 80211ac (VHT) or 80211ax (HE), one "
                                    "spatial stream on 20 MHz; its slot, SIFS, CWmin/CWmax, preamble and MCS table")
    phy_rate_bps: float | None = option(None, gt=0, doc="the data rate of every station, one of the standard's MCS "
                                        "rates; default: the fastest MCS whose minimum SNR the station's "
                                        "gain x power / noise_power meets (silent below MCS 0's)")
    rts_cts: bool = option(False, doc="RTS/CTS before every frame (else basic access: DATA, then ACK)")
    ampdu_bytes: int | None = option(None, ge=1, doc="the A-MPDU size limit in bytes (802.11n on); default the "
                                     "standard's (65,535 / 1,048,575 / 6,500,631)")
    mpdu_bits: int = option(12000, ge=8, doc="payload bits of one MPDU (12000: 1500-byte MSDUs); an upload of l "
                            "bits is ceil(l / mpdu_bits) MPDUs, sent in frames of as many as fit into an A-MPDU")
    retry_limit: int | None = option(7, ge=1, doc="transmissions of a frame before it is dropped and counted "
                                     "(its bits are sent again as a new frame: the upload still arrives whole); "
                                     "none: never dropped, as in Bianchi's model")
    interframe: str = option("difs", choices=("difs", "aifs_be"),
                             doc="the idle time before the backoff: difs (SIFS + 2 slots, the DCF) or aifs_be "
                                 "(SIFS + 3 slots, EDCA's best effort)")


class WiFi(AccessScheme, ListensWhileContending, AddsUploadColumns):
    """IEEE 802.11 DCF on one channel every device hears (no hidden terminals, no capture, no channel
    errors: a frame is lost only to a collision).

    A device with an upload of l bits contends for ceil(l / mpdu_bits) MPDUs, sent in frames (one
    PPDU each: an A-MPDU of as many MPDUs as fit the aggregate limit, the BlockAck window and
    aPPDUMaxTime; 802.11a one MPDU a frame) at its MCS: ``phy_rate_bps``, or the fastest the SNR
    g P / N0 of the link supports, chosen as its upload starts and kept to its end (no rate
    adaptation). Every frame is won by the DCF (wirelessfl.access.wifi_dcf: DIFS, a backoff uniform
    in [0, CW - 1] counted down in idle slots and frozen while the medium is busy, collisions when two
    counters end in the same slot, CW doubling up to CWmax, reset on success); the upload ends with
    the ACK of its last frame. The backoff draws come from the scheme's own random stream "wifi".

    Time on the air (and so transmit energy, P x time) is what the device itself transmitted: its
    DATA frames (and RTSs), collided ones included; ``attempts`` counts its transmissions. Per
    upload, ``upload_counters[seq]`` (event protocols: by the update's dispatch number) and
    ``round_counters`` (sync: one row per device of the last round, in the order of its schedule)
    keep collisions, frames, retries and drops (:data:`COUNTERS`); ``round_info`` adds the round's
    (event protocols: since the last row's) collisions, frames_acked and frames_dropped to rounds.csv.

    There is no closed form for the time finite transfers take under the DCF (Bianchi's model is
    for saturated stations), so a sync round runs the DCF itself (:meth:`schedule`), with its own
    random draws; ``airtime_s`` is an upload's collision-free time on the air.
    """

    Options = WifiOptions
    concurrent = False  # one transmitter at a time; collisions are the exception, not a shared band
    contention = True  # time on the air decided by contention as it goes
    upload_columns = COUNTERS  # updates.csv: each upload's collisions, frames, retries and drops

    def __init__(self, link: Link, wifi_standard: str = "80211ac", phy_rate_bps: float | None = None,
                 rts_cts: bool = False, ampdu_bytes: int | None = None, mpdu_bits: int = 12000,
                 retry_limit: int | None = 7, interframe: str = "difs", rng: np.random.Generator | None = None):
        super().__init__(link)
        self.phy: WifiPhy = STANDARDS[wifi_standard]
        self.fixed_mcs: Mcs | None = None if phy_rate_bps is None else mcs_for_rate(self.phy, phy_rate_bps)
        if phy_rate_bps is not None and self.fixed_mcs is None:
            raise ValueError(f"phy_rate_bps = {phy_rate_bps:g} is not a rate of {wifi_standard}: {self.phy.rates_bps}")
        self.rts_cts, self.mpdu_bits, self.retry_limit = bool(rts_cts), int(mpdu_bits), retry_limit
        self.ampdu_bytes = ampdu_bytes
        self.ifs_s = self.phy.difs_s if interframe == "difs" else self.phy.aifs_be_s
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.upload_counters: dict[int, list[int]] = {}
        self.round_counters = np.zeros((0, len(COUNTERS)), dtype=np.int64)
        self._row = dict.fromkeys(("collisions", "frames_acked", "frames_dropped"), 0)  # since rounds.csv's last row
        self._frames: dict[tuple[int, float], FrameExchange] = {}
        self._uploads: dict[float, tuple[float, int]] = {}  # airtime_s -> (bits, MCS index): see schedule

    @classmethod
    def from_scenario(cls, scenario, options: WifiOptions) -> "WiFi":
        """The options as given; the backoff draws from the "wifi" stream."""
        from ..rng import stream

        return cls(Link(scenario.link), options.wifi_standard, options.phy_rate_bps, options.rts_cts,
                   options.ampdu_bytes, options.mpdu_bits, options.retry_limit, options.interframe,
                   stream(scenario.seed, "wifi"))

    @classmethod
    def check(cls, scenario, options: WifiOptions) -> None:
        """One line naming the field: an unknown standard, a rate the standard does not have, an
        aggregate limit above the standard's (or any with 802.11a), MPDUs above the aggregate limit
        or the largest MSDU; the link's own packets and errors are refused (frames are the packets,
        collisions the errors)."""
        link = scenario.link
        for field, on in (("link.packet_bits", link.packet_bits is not None),
                          ("link.rate_bps", link.rate_bps is not None), ("link.errors", link.errors != "none")):
            if on:
                raise ConfigError(f"{field}: not used with link.access = 'wifi', whose frames are its packets "
                                  "(link.mpdu_bits, link.phy_rate_bps) and collisions its errors (leave it unset)")
        if options.wifi_standard not in STANDARDS:
            raise ConfigError(f"link.wifi_standard = {options.wifi_standard!r}: unknown; one of "
                              f"{', '.join(STANDARDS)}")
        p = STANDARDS[options.wifi_standard]
        if options.phy_rate_bps is not None and mcs_for_rate(p, options.phy_rate_bps) is None:
            rates = ", ".join(f"{r / 1e6:.4g}e6" for r in p.rates_bps)
            raise ConfigError(f"link.phy_rate_bps = {options.phy_rate_bps:g}: not a rate of {p.name} (one stream, "
                              f"20 MHz); one of {rates} (within 0.1 %)")
        if options.ampdu_bytes is not None and not p.aggregates:
            raise ConfigError(f"link.ampdu_bytes = {options.ampdu_bytes}: {p.name} does not aggregate (one MPDU "
                              "a frame); leave it unset or use 80211n, 80211ac or 80211ax")
        if options.ampdu_bytes is not None and options.ampdu_bytes > p.max_ampdu_bytes:
            raise ConfigError(f"link.ampdu_bytes = {options.ampdu_bytes}: above {p.name}'s A-MPDU limit; at most "
                              f"{p.max_ampdu_bytes}")
        limit = options.ampdu_bytes if options.ampdu_bytes is not None else \
            p.max_ampdu_bytes if p.aggregates else p.max_psdu_bytes
        mpdu_bytes = math.ceil(options.mpdu_bits / 8) + p.mac_overhead_bytes + (4 if p.aggregates else 0)
        if mpdu_bytes > limit:
            raise ConfigError(f"link.mpdu_bits = {options.mpdu_bits}: an MPDU of {mpdu_bytes} bytes (with MAC header"
                              f"{' and delimiter' if p.aggregates else ''}) is above the aggregate limit of {limit} "
                              f"bytes ({'link.ampdu_bytes' if options.ampdu_bytes is not None else p.name}); at most "
                              f"{8 * (limit - mpdu_bytes + math.ceil(options.mpdu_bits / 8))}")
        if options.mpdu_bits > 8 * MAX_MSDU_BYTES:
            raise ConfigError(f"link.mpdu_bits = {options.mpdu_bits}: above the largest MSDU, {MAX_MSDU_BYTES} "
                              f"bytes; at most {8 * MAX_MSDU_BYTES}")

    # --- stations and their frames -------------------------------------------------------------

    def station_mcs(self, gain: float, power: float) -> Mcs | None:
        """The MCS of a station at ``gain`` x ``power``: ``phy_rate_bps``'s, or the fastest its SNR
        supports; None: it cannot send (no power, or an SNR below MCS 0's minimum)."""
        if not power > 0 or not gain > 0:
            return None
        if self.fixed_mcs is not None:
            return self.fixed_mcs
        return best_mcs(self.phy, gain * power / self.link.noise_power)

    def frame_bits(self, mcs: Mcs) -> float:
        """The payload of a full frame at ``mcs``: as many MPDUs as one PPDU carries."""
        return max_mpdus(self.phy, mcs, self.mpdu_bits, self.ampdu_bytes) * self.mpdu_bits

    def frame(self, mcs_index: int, bits_left: float) -> FrameExchange:
        """The exchange of the next frame of a station at MCS ``mcs_index`` with ``bits_left`` to send."""
        mcs = self.phy.mcs[mcs_index]
        payload = min(bits_left, self.frame_bits(mcs))
        key = (mcs_index, payload)
        f = self._frames.get(key)
        if f is None:
            if len(self._frames) > 4096:
                self._frames.clear()
            f = self._frames[key] = exchange(self.phy, mcs, payload, self.mpdu_bits, self.rts_cts)
        return f

    def new_dcf(self) -> Dcf:
        """A DCF on an idle medium with this scheme's timing, frames and random stream."""
        p = self.phy
        return Dcf(p.slot_s, p.sifs_s, self.ifs_s, eifs_s(p, self.ifs_s), p.cw_min, p.max_backoff_stage,
                   self.retry_limit, lambda s: self.frame(s.mcs, s.bits_left), self.rng)

    def collision_free_s(self, bits: float, mcs: Mcs) -> float:
        """An upload's time on the air were it never to collide: its frames' DATA (and RTS)."""
        if not bits > 0:
            return 0.0
        full = self.frame_bits(mcs)
        whole, rest = divmod(float(bits), full)
        air = whole * self.frame(mcs.index, full).on_air_s()
        return air + (self.frame(mcs.index, rest).on_air_s() if rest > 1e-9 else 0.0)

    # --- the two timing models -----------------------------------------------------------------

    def listening_s(self, tx_start: np.ndarray, tx_end: np.ndarray, airtime_s: np.ndarray) -> np.ndarray:
        """Each upload's time listening: its first backoff to its last ACK, less its own frames."""
        with np.errstate(invalid="ignore"):
            return np.nan_to_num(np.maximum(tx_end - tx_start - airtime_s, 0.0))

    def airtime_s(self, bits, gain: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Each device's collision-free time on the air (inf: it cannot send). Remembered with its
        bits and MCS, which :meth:`schedule` reads back from it."""
        gain, power = np.asarray(gain, dtype=float), np.asarray(power, dtype=float)
        bits = np.broadcast_to(np.asarray(bits, dtype=float), gain.shape)
        out = np.empty(gain.shape)
        if len(self._uploads) > 65536:
            self._uploads.clear()
        for i, (b, g, pw) in enumerate(zip(bits.tolist(), gain.tolist(), power.tolist())):
            mcs = self.station_mcs(g, pw)
            out[i] = math.inf if mcs is None else self.collision_free_s(b, mcs)
            if mcs is not None:
                self._uploads[float(out[i])] = (b, mcs.index)
        return out

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """Not known when an upload starts: contention decides it."""
        return math.nan

    def _upload_of(self, airtime_s: float) -> tuple[float, int] | None:
        """(bits, MCS index) of the upload ``airtime_s`` came from (None: it cannot send). An airtime
        :meth:`airtime_s` did not give is read as an upload at ``phy_rate_bps`` (default: the fastest
        MCS) carrying airtime x rate bits."""
        if not math.isfinite(airtime_s):
            return None
        known = self._uploads.get(float(airtime_s))
        if known is not None:
            return known
        mcs = self.fixed_mcs if self.fixed_mcs is not None else self.phy.mcs[-1]
        return airtime_s * mcs.rate_bps, mcs.index

    def schedule(self, ready_s: np.ndarray, airtime_s: np.ndarray, deadline_s: float | None = None) -> UplinkSchedule:
        """The round's uplink by the DCF itself: device i starts contending at ready_s[i] with the
        upload ``airtime_s[i]`` came from (see :meth:`airtime_s`); contention rounds follow one
        another until every upload is acknowledged. Under a deadline, a transmission that begins
        before it counts (its time on the air up to the deadline), an upload counts as arrived only
        if its last ACK ends by it, and nothing begins after it. Each device's time on the air and
        transmissions come back in ``on_air_s`` and ``attempts``; its tallies in ``round_counters``."""
        k = ready_s.size
        uploads = [self._upload_of(a) for a in np.asarray(airtime_s, dtype=float).tolist()]
        tx_start, tx_end = np.full(k, np.nan), np.full(k, np.nan)
        on_air, attempts, arrived = np.zeros(k), np.zeros(k, dtype=np.int64), np.zeros(k, dtype=bool)
        counters = np.zeros((k, len(COUNTERS)), dtype=np.int64)
        ready = np.asarray(ready_s, dtype=float)
        joining = []
        for i in np.argsort(ready, kind="stable").tolist():
            if uploads[i] is None:
                continue
            if not uploads[i][0] > 0:  # nothing to send: through at once
                tx_start[i] = tx_end[i] = ready[i]
                arrived[i] = True
            elif deadline_s is None or ready[i] < deadline_s:
                joining.append(i)
        dcf, nxt, cut = self.new_dcf(), 0, False
        while True:
            start = dcf.next_start_s()
            if nxt < len(joining) and (start is None or ready[joining[nxt]] <= start):
                i = joining[nxt]
                dcf.join(i, float(ready[i]), *uploads[i])
                tx_start[i], nxt = ready[i], nxt + 1
                continue
            if start is None:
                break
            if deadline_s is not None and start >= deadline_s:
                cut = True
                break
            r = dcf.step()
            for s, air in zip(r.stations, r.on_air_s):
                attempts[s.key] += 1
                on_air[s.key] += air if deadline_s is None else min(air, deadline_s - r.start_s)
                counters[s.key] = s.collisions, s.frames, s.retries, s.drops
            self.tally(r)
            if r.finished and (deadline_s is None or r.ack_end_s <= deadline_s):
                i = r.stations[0].key
                arrived[i], tx_end[i] = True, r.ack_end_s
        self.round_counters = counters
        started = np.flatnonzero(~np.isnan(tx_start))
        order = started[np.argsort(tx_start[started], kind="stable")]
        if deadline_s is not None and (cut or not arrived.all()):
            end = float(deadline_s)
        else:
            end = float(np.nanmax(tx_end)) if np.isfinite(tx_end).any() else -math.inf
        return UplinkSchedule(order, tx_start, arrived, end, tx_end, on_air_s=on_air, attempts=attempts)

    def event_uplink(self, host):
        """The DCF among the devices in flight: one event per contention round."""
        from .wifi_uplink import WifiUplink

        return WifiUplink(host, self)

    # --- tallies and state ---------------------------------------------------------------------

    def tally(self, r) -> None:
        """A contention round's collisions, frames and drops, for rounds.csv's next row."""
        self._row["collisions"] += 0 if r.success else len(r.stations)
        self._row["frames_acked"] += int(r.success)
        self._row["frames_dropped"] += len(r.dropped)

    def record(self, station: Station) -> None:
        """An upload's tallies so far, under its update's dispatch number (event protocols); beyond
        :data:`KEPT_UPLOADS` uploads, the oldest one's are forgotten (``take_counts`` takes them)."""
        counters = self.upload_counters
        if station.key not in counters and len(counters) >= KEPT_UPLOADS:
            del counters[next(iter(counters))]
        counters[station.key] = [station.collisions, station.frames, station.retries, station.drops]

    def take_counts(self, seq: int) -> tuple:
        """The tallies of the upload of update ``seq`` (and forget them), in :data:`COUNTERS`' order;
        zeros for one that never contended."""
        return tuple(self.upload_counters.pop(seq, (0,) * len(COUNTERS)))

    def round_counts(self) -> np.ndarray:
        """Sync: the last round's tallies, one row per device in the order ``schedule`` got them."""
        return self.round_counters

    def round_info(self) -> dict[str, float]:
        """Since the last row of rounds.csv (a sync round, or an aggregation): transmissions that
        collided, frames acknowledged, frames dropped at the retry limit (columns collisions,
        frames_acked, frames_dropped)."""
        out, self._row = dict(self._row), dict.fromkeys(self._row, 0)
        return out

    def state_dict(self) -> dict[str, Any]:
        """The backoff draws' random stream, the tallies not yet in a row, the uploads' tallies."""
        return {"rng": self.rng.bit_generator.state, "row": dict(self._row),
                "upload_counters": [[seq, *row] for seq, row in self.upload_counters.items()],
                "round_counters": self.round_counters.copy()}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore them."""
        self.rng.bit_generator.state = state["rng"]
        self._row = {k: int(v) for k, v in state["row"].items()}
        self.upload_counters = {int(row[0]): [int(x) for x in row[1:]] for row in state["upload_counters"]}
        self.round_counters = np.asarray(state["round_counters"], dtype=np.int64)
