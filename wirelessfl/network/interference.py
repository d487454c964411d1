"""Uplink interference between cells on one sub-band (network.reuse < network.cells), under TDMA:
each cell has one transmitter at a time, and a transmission in cell c hears every transmission of
the other cells on its sub-band at site c.

A device's rate while it sends is B_c log2(1 + SINR), B_c = B / reuse, with

    SINR_n = p_n g_n / (N0_c + sum over m on the air in other cells of n's sub-band of p_m g_m,c)

g_n its gain to its own site (the round's or the upload's draw, as without interference) and g_m,c
the gain of interferer m to site c: its mean path gain to c (path loss and shadowing, the
channel's) times, for each upload, an Exp(1) Rayleigh factor per site (network.interference_fading
= "rayleigh", from the "interference" stream) or 1 ("none"). The rates are piecewise constant: they
change when a transmission on the sub-band starts or ends, and an upload ends when its bits are sent.

:func:`joint_tdma` is the closed form of a sync round (every cell's queue at once, rates recomputed
at each start and end); :class:`InterferedUplinks` the event uplink (a one-transmitter queue per
cell, the sub-bands' transmissions timed together). Both count each cell's SINR loss,
10 log10(SNR / SINR) weighted by time on the air (:class:`LossMeter`).
"""
from __future__ import annotations

import math

import numpy as np
import simpy

from ..access import UplinkSchedule, queue
from ..access.on_air import RatesOnTheAir
from ..des import ON_AIR

__all__ = ["InterferedUplinks", "LossMeter", "joint_tdma", "sinr_rates"]


def sinr_rates(cells: np.ndarray, bands: np.ndarray, power: np.ndarray, gains: np.ndarray, cross: np.ndarray,
               bandwidth_hz: float, noise_power: float) -> tuple[np.ndarray, np.ndarray]:
    """(rates, SINR loss in dB) of k transmissions on the air together: ``cells`` (k,) each one's
    cell, ``bands`` (C,) each cell's sub-band, ``power`` and ``gains`` (k,) to its own site, ``cross``
    (k, C) each one's gain to every site; one cell's B and N0."""
    own_band = bands[cells]
    heard = (own_band[None, :] == own_band[:, None]) & (cells[None, :] != cells[:, None])  # [n, m]: n hears m
    interference = (heard * (power[None, :] * cross[:, cells].T)).sum(axis=1)  # sum over m of p_m g_m,c(n)
    signal = power * gains
    sinr = signal / (noise_power + interference)
    with np.errstate(divide="ignore"):
        loss = 10.0 * np.log10((signal / noise_power) / sinr) if signal.size else np.zeros(0)
    return bandwidth_hz * np.log1p(sinr) / math.log(2.0), np.where(interference > 0, loss, 0.0)


class LossMeter:
    """Each cell's time on the air and its SINR loss x time (summary.json's ``sinr_loss_db``)."""

    def __init__(self, count: int):
        self.air_s, self.loss_db_s = np.zeros(count), np.zeros(count)

    def add(self, cells: np.ndarray, loss_db: np.ndarray, dt: float) -> None:
        if dt > 0 and cells.size:
            np.add.at(self.air_s, cells, dt)
            np.add.at(self.loss_db_s, cells, loss_db * dt)

    def mean_db(self) -> np.ndarray:
        """Each cell's SINR loss averaged over its time on the air (0 where it never sent)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.air_s > 0, self.loss_db_s / self.air_s, 0.0)

    def state_dict(self) -> dict:
        return {"air_s": self.air_s.copy(), "loss_db_s": self.loss_db_s.copy()}

    def load_state(self, state: dict) -> None:
        self.air_s = np.asarray(state["air_s"], dtype=float).copy()
        self.loss_db_s = np.asarray(state["loss_db_s"], dtype=float).copy()


def joint_tdma(cells: np.ndarray, bands: np.ndarray, ready: np.ndarray, bits: np.ndarray, power: np.ndarray,
               gains: np.ndarray, cross: np.ndarray, bandwidth_hz: float, noise_power: float,
               deadline_s: float | None, meter: LossMeter | None = None) -> UplinkSchedule:
    """A sync round's uplink with interference, in closed form: every cell a first-come-first-served
    queue of its devices (ready at ``ready``, ties in index order), at most one on the air per cell,
    the rates of those on the air together recomputed at each start and end (``sinr_rates``); an
    upload not done by ``deadline_s`` is dropped there. ``on_air_s`` of the result is each upload's
    time on the air."""
    k = len(ready)
    tx_start, tx_end = np.full(k, math.nan), np.full(k, math.nan)
    left = np.broadcast_to(np.asarray(bits, dtype=float), (k,)).copy()
    queues = {int(c): [int(i) for i in np.flatnonzero(cells == c)[np.argsort(ready[cells == c], kind="stable")]]
              for c in np.unique(cells)}
    on_air: dict[int, int] = {}  # cell -> the device index sending in it
    t = float(ready.min()) if k else 0.0
    end = deadline_s if deadline_s is not None else math.inf
    while t < end:
        for c, waiting in queues.items():  # idle cells start their next ready upload
            if c not in on_air and waiting and ready[waiting[0]] <= t:
                i = waiting.pop(0)
                on_air[c], tx_start[i] = i, t
        if not on_air:
            heads = [ready[w[0]] for w in queues.values() if w]
            if not heads:
                break
            t = max(t, float(min(heads)))
            continue
        sending = np.array(list(on_air.values()))
        rates, loss = sinr_rates(cells[sending], bands, power[sending], gains[sending], cross[sending],
                                 bandwidth_hz, noise_power)
        with np.errstate(divide="ignore"):
            done_at = t + np.where(rates > 0, left[sending] / rates, math.inf)
        heads = [ready[w[0]] for c, w in queues.items() if w and c not in on_air]
        step = min(float(done_at.min()), min(heads, default=math.inf), end)
        if not math.isfinite(step):
            break
        left[sending] -= rates * (step - t)
        if meter is not None:
            meter.add(cells[sending], loss, step - t)
        t = step
        for i, when in zip(sending.tolist(), done_at.tolist()):
            if when <= t:
                tx_end[i], left[i] = t, 0.0
                del on_air[int(cells[i])]
    arrived = ~np.isnan(tx_end)
    if deadline_s is not None:
        arrived &= tx_end <= deadline_s
    started = np.flatnonzero(~np.isnan(tx_start))
    order = started[np.argsort(tx_start[started], kind="stable")]
    stop = np.where(arrived, tx_end, np.where(np.isnan(tx_start), math.nan, min(t, end)))
    on_air_s = np.where(np.isnan(tx_start), 0.0, stop - tx_start)
    end_s = float(np.nanmax(stop)) if started.size else (t if k else 0.0)
    if deadline_s is not None and not arrived.all():
        end_s = deadline_s
    return UplinkSchedule(order, tx_start, arrived, end_s, tx_end=np.where(arrived, tx_end, math.nan),
                          on_air_s=on_air_s, attempts=(~np.isnan(tx_start)).astype(np.int64))


class InterferedUplinks(RatesOnTheAir):
    """The event uplink of cells that interfere (wirelessfl.access.EventUplink): one transmitter at a
    time per cell, first come first served, and every transmission on the air timed with the others
    at their SINR rates, recomputed whenever one starts or ends."""

    def __init__(self, host, cells):
        super().__init__(host)
        self.cells = cells
        self.queues = [simpy.Resource(host.env, capacity=1) for _ in range(cells.count)]
        self.cross: dict[int, np.ndarray] = {}  # an upload's gains to every site, drawn as it went on the air
        self.loss = np.zeros(0)  # the SINR loss of each active upload, since t_last
        link = cells.accesses[0].link
        self.bandwidth_hz, self.noise_power = link.bandwidth_hz, link.noise_power

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): wait for its cell's transmitter, then send its bits
        at the rates the sub-band allows. Returns True."""
        host, cells = self.host, self.cells
        if u.phase != ON_AIR:  # a resumed request keeps its place
            queue(host, u)
        with self.queues[cells.serving[u.device]].request() as slot:
            yield slot
            if u.done is None:
                u.done = host.env.event()
            if u.phase != ON_AIR:
                u.phase = ON_AIR
                host.start_transmission(u)
                u.bits_left, u.attempts = float(u.bits), 1
                self.cross[u.seq] = cells.cross_gains(u.device)
                self._join(u)
            return (yield from self._until_sent(u))

    def on_air_until(self, u, t: float) -> float:
        return t - u.tx_start_s

    def _leave(self, u) -> None:
        super()._leave(u)
        self.cross.pop(u.seq, None)

    def _elapsed(self, dt: float) -> None:
        """Each active upload's cell counts its SINR loss over ``dt``."""
        self.cells.meter.add(np.array([self.cells.serving[u.device] for u in self.active]), self.loss, dt)

    def _rates_now(self) -> list[float]:
        cells, active = self.cells, self.active
        rates, self.loss = sinr_rates(
            np.array([cells.serving[u.device] for u in active]), cells.sites.bands,
            np.array([u.power for u in active]), np.array([u.gain for u in active]),
            np.array([self.cross[u.seq] for u in active]), self.bandwidth_hz, self.noise_power)
        return rates.tolist()

    def state_dict(self) -> dict:
        """The uploads on the air in order, their gains to every site, and when their bits were last counted."""
        return {"active": [u.seq for u in self.active], "t_last": self.t_last,
                "cross": {seq: g.tolist() for seq, g in self.cross.items()}}

    def load_state(self, state: dict) -> None:
        """Restore the uploads on the air (after the engine restored the updates)."""
        self.active = [self.host.update(seq) for seq in state["active"]]
        self.cross = {int(seq): np.array(g) for seq, g in state["cross"].items()}
        self.t_last = float(state["t_last"])
        for u in self.active:
            if u.done is None:
                u.done = self.host.env.event()
        self._reschedule()
