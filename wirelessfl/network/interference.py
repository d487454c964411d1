"""Uplink interference between cells on one sub-band (network.reuse < network.cells). Under TDMA
each cell has one transmitter at a time, and a transmission in cell c hears every transmission of
the other cells on its sub-band at site c (below); on shared bands (FDMA, OFDMA) each cell's band is
split among its devices and interference is per resource block (:func:`shared_band_rates`).

A device's rate while it sends is B_c log2(1 + SINR), B_c = B / reuse, with

    SINR_n = p_n g_n / (N0_c + sum over m on the air in other cells of n's sub-band of p_m g_m,c)

g_n its gain to its own site (the round's or the upload's draw, as without interference) and g_m,c
the gain of interferer m to site c: its mean path gain to c (path loss and shadowing, the
channel's) times, for each upload, an Exp(1) Rayleigh factor per site (network.interference_fading
= "rayleigh", from the "interference" stream) or 1 ("none"). The rates are piecewise constant: they
change when a transmission on the sub-band starts or ends, and an upload ends when its bits are sent.

On a shared band each device of cell c puts emitted[m, b] into block b of its band (its scheme's
``emitted``: FDMA its power P_m over one band-wide block, since its sub-band of B / k lies anywhere in
the band; OFDMA a[m, b] P_m / n_m into each block it holds), site c hears
I_c[b] = sum over m sending in other cells of its sub-band of emitted[m, b] g_m,c, and its devices send
at the scheme's rates with I_c[b] added to each block's noise: FDMA's (B / k) log2(1 + g P k / (N0 + I)),
OFDMA's blocks at G[i, b] P_i R / (n_i (N0 + R I_c[b])). The allocation does not know of the
interference. Under sync each cell's split is fixed for the round among all its devices (as
FDMA.schedule's), under the event protocols among those on the air.

:func:`joint_tdma` and :func:`joint_shared` are the closed forms of a sync round (every cell's uploads
at once, rates recomputed at each start and end); :class:`InterferedUplinks` the event uplink (a
one-transmitter queue per cell under TDMA, every ready upload on the air on shared bands; the
sub-bands' transmissions timed together). All count each cell's SINR loss, 10 log10(SNR / SINR) under
TDMA and FDMA, 10 log10(1 + R mean_b I_c[b] / N0) under OFDMA (the same where blocks are flat),
weighted by time on the air (:class:`LossMeter`).
"""
from __future__ import annotations

import math

import numpy as np

from ..access import DrawsBlockFading, UplinkSchedule, queue
from ..access.on_air import RatesOnTheAir
from ..capabilities import provides
from ..des import ON_AIR, RANK_DEVICE, Band, priority

__all__ = ["InterferedUplinks", "LossMeter", "UploadBlocks", "joint_shared", "joint_tdma", "shared_band_rates",
           "sinr_rates"]


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


def shared_band_rates(cells: np.ndarray, bands: np.ndarray, accesses: list, sending: np.ndarray, power: np.ndarray,
                      gains: np.ndarray, cross: np.ndarray, fading: np.ndarray | None,
                      emitted: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rates, SINR loss in dB) of the uploads ``sending`` (indices) among k that share each cell's
    band (fdma, ofdma): ``cells`` (k,) each one's cell, ``power``, ``gains`` (k,) to its own site,
    ``cross`` (k, C) to every site, ``fading`` (k, R) OFDMA's block factors or None. Each cell's
    scheme shares its band among its devices (all k of the cell when ``emitted`` is given: sync's
    split fixed for the round; else those sending) and says what each puts into the band
    (``emitted``, (k, R)); site c hears, in each block b, I_c[b] = sum over m sending in other cells
    of c's sub-band of emitted[m, b] g_m,c, and each of its devices sends at the scheme's rate with
    that interference. The loss of a cell's uploads is 10 log10(1 + R mean_b I_c[b] / N0)."""
    fixed = emitted is not None
    if not fixed:
        emitted = band_powers(cells, accesses, sending, power, gains, fading)
    rates, loss = np.zeros(sending.size), np.zeros(sending.size)
    band_of = bands[cells[sending]]
    for c in np.unique(cells[sending]).tolist():
        others = sending[(band_of == bands[c]) & (cells[sending] != c)]
        heard = (emitted[others] * cross[others, c][:, None]).sum(axis=0)  # (R,)
        group = np.flatnonzero(cells == c) if fixed else sending[cells[sending] == c]
        access = accesses[c]
        all_rates = access.rates_bps(gains[group], power[group], None if fading is None else fading[group],
                                     heard if others.size else None)
        at = np.flatnonzero(cells[sending] == c)
        rates[at] = all_rates[np.searchsorted(group, sending[at])]
        loss[at] = 10.0 * math.log10(1.0 + heard.size * float(heard.mean()) / access.link.noise_power)
    return rates, loss


def band_powers(cells: np.ndarray, accesses: list, group: np.ndarray, power: np.ndarray, gains: np.ndarray,
                fading: np.ndarray | None) -> np.ndarray:
    """What each of the uploads ``group`` (sorted indices among k) puts into its cell's band, each
    cell's scheme sharing the band among the cell's uploads in ``group`` ((k, R): zero outside it)."""
    parts = {}
    for c in np.unique(cells[group]).tolist():
        mine = group[cells[group] == c]
        parts[c] = (mine, accesses[c].emitted(gains[mine], power[mine], None if fading is None else fading[mine]))
    width = next(iter(parts.values()))[1].shape[1] if parts else 1
    out = np.zeros((cells.size, width))
    for mine, emitted in parts.values():
        out[mine] = emitted
    return out


def joint_shared(cells: np.ndarray, bands: np.ndarray, accesses: list, ready: np.ndarray, bits: np.ndarray,
                 power: np.ndarray, gains: np.ndarray, cross: np.ndarray, fading: np.ndarray | None,
                 deadline_s: float | None, meter: LossMeter | None = None) -> UplinkSchedule:
    """A sync round's uplink with interference on shared bands (fdma, ofdma), in closed form: each
    device on the air from when it is ready (before ``deadline_s``) until its bits are sent, its
    cell's band split among all the cell's devices for the round (as FDMA.schedule does), its rate
    recomputed whenever an upload of another cell on its sub-band starts or ends
    (``shared_band_rates``); an upload not done by ``deadline_s`` is dropped there."""
    k = len(ready)
    everyone = np.arange(k)
    emitted = band_powers(cells, accesses, everyone, power, gains, fading)
    left = np.broadcast_to(np.asarray(bits, dtype=float), (k,)).copy()
    end = deadline_s if deadline_s is not None else math.inf
    starts = ready < end
    tx_start, tx_end = np.where(starts, ready, math.nan), np.full(k, math.nan)
    t = float(ready.min()) if k else 0.0
    while t < end:
        sending = np.flatnonzero(starts & (ready <= t) & np.isnan(tx_end))
        later = ready[starts & (ready > t)]
        if not sending.size:
            if not later.size:
                break
            t = float(later.min())
            continue
        rates, loss = shared_band_rates(cells, bands, accesses, sending, power, gains, cross, fading, emitted)
        step, done_at = _send(left, sending, rates, t, min(float(later.min(initial=math.inf)), end), cells, loss,
                              meter)
        if not math.isfinite(step):
            break
        t = step
        finished = sending[done_at <= t]
        tx_end[finished], left[finished] = t, 0.0
    return _schedule(tx_start, tx_end, t, deadline_s)


class UploadBlocks:
    """Fading within uploads that interfere (channel.coherence_s, devices.speed_mps): an upload that
    went on the air at t0 is in block k over [t0 + k T_c, t0 + (k + 1) T_c), at its first gain in
    block 0 and one Gauss-Markov step further (wirelessfl.fading) in each next block, drawn from the
    "fading" stream as the block begins. Uploads are keyed by an index (a sync round's) or a dispatch
    number (the event uplink's)."""

    def __init__(self, fading, rng: np.random.Generator):
        self.fading, self.rng = fading, rng
        self.coherence_s = fading.coherence_s
        self.state: dict[int, list] = {}  # key -> [device, amplitude h, t0, block k, gain]

    def start(self, key: int, device: int, gain: float, t: float) -> None:
        """An upload at ``gain`` goes on the air at ``t``."""
        self.state[key] = [device, self.fading.first_block(gain, self.rng), t, 0, gain]

    def gain(self, key: int) -> float:
        """The upload's gain in its current block."""
        return self.state[key][4]

    def next_s(self, key: int) -> float:
        """When the upload's next block begins."""
        _, _, t0, k, _ = self.state[key]
        return t0 + (k + 1) * self.coherence_s

    def step(self, key: int) -> float:
        """The upload enters its next block: its gain there."""
        s = self.state[key]
        s[1], s[4] = self.fading.next_block(s[0], s[1], self.rng)
        s[3] += 1
        return s[4]

    def stop(self, key: int) -> None:
        self.state.pop(key, None)

    def state_dict(self) -> dict:
        return {int(key): [d, h.real, h.imag, t0, k, g] for key, (d, h, t0, k, g) in self.state.items()}

    def load_state(self, state: dict) -> None:
        self.state = {int(key): [int(d), complex(re, im), float(t0), int(k), float(g)]
                      for key, (d, re, im, t0, k, g) in state.items()}


def _next_block_s(blocks: UploadBlocks | None, sending: np.ndarray) -> float:
    """When the first of the uploads ``sending`` enters its next fading block (inf without fading)."""
    return min((blocks.next_s(i) for i in sending.tolist()), default=math.inf) if blocks is not None else math.inf


def _enter_blocks(blocks: UploadBlocks | None, sending: np.ndarray, finished, t: float, gains: np.ndarray) -> None:
    """The uploads that ended leave; those whose next block begins at ``t`` take its gain."""
    if blocks is None:
        return
    done = set(np.asarray(finished).tolist())
    for i in sending.tolist():
        if i in done:
            blocks.stop(i)
        elif blocks.next_s(i) <= t:
            gains[i] = blocks.step(i)


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
               deadline_s: float | None, meter: LossMeter | None = None, blocks: UploadBlocks | None = None,
               devices: np.ndarray | None = None) -> UplinkSchedule:
    """A sync round's uplink with interference, in closed form: every cell a first-come-first-served
    queue of its devices (ready at ``ready``, ties in index order), at most one on the air per cell,
    the rates of those on the air together recomputed at each start and end (``sinr_rates``) and,
    with fading within uploads (``blocks``; ``devices`` the uploads' devices), at each block's start;
    an upload not done by ``deadline_s`` is dropped there. ``on_air_s`` of the result is each upload's
    time on the air."""
    k = len(ready)
    if blocks is not None:
        blocks.state.clear()
        gains = np.array(gains, dtype=float)
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
                if blocks is not None:
                    blocks.start(i, int(devices[i]), float(gains[i]), t)
        if not on_air:
            heads = [ready[w[0]] for w in queues.values() if w]
            if not heads:
                break
            t = max(t, float(min(heads)))
            continue
        sending = np.array(list(on_air.values()))
        rates, loss = sinr_rates(cells[sending], bands, power[sending], gains[sending], cross[sending],
                                 bandwidth_hz, noise_power)
        heads = [ready[w[0]] for c, w in queues.items() if w and c not in on_air]
        step, done_at = _send(left, sending, rates, t, min(min(heads, default=math.inf), end,
                                                            _next_block_s(blocks, sending)), cells, loss, meter)
        if not math.isfinite(step):
            break
        t = step
        for i, when in zip(sending.tolist(), done_at.tolist()):
            if when <= t:
                tx_end[i], left[i] = t, 0.0
                del on_air[int(cells[i])]
        _enter_blocks(blocks, sending, sending[done_at <= t], t, gains)
    return _schedule(tx_start, tx_end, t, deadline_s)


def _send(left: np.ndarray, sending: np.ndarray, rates: np.ndarray, t: float, next_s: float, cells: np.ndarray,
          loss: np.ndarray, meter: LossMeter | None) -> tuple[float, np.ndarray]:
    """The uploads ``sending`` send at ``rates`` from ``t`` until the first of them is done or
    ``next_s`` (another change) comes: their bits left and each cell's SINR loss are brought to then.
    Returns (then, when each would be done at these rates); nothing is sent when then is infinite."""
    with np.errstate(divide="ignore"):
        done_at = t + np.where(rates > 0, left[sending] / rates, math.inf)
    step = min(float(done_at.min()), next_s)
    if math.isfinite(step):
        left[sending] -= rates * (step - t)
        if meter is not None:
            meter.add(cells[sending], loss, step - t)
    return step, done_at


def _schedule(tx_start: np.ndarray, tx_end: np.ndarray, t: float, deadline_s: float | None) -> UplinkSchedule:
    """A joint round's schedule from each upload's start and end (NaN: never began, not done) and
    where its loop stopped (``t``): those not done by the deadline were cut there, on the air."""
    k = tx_start.size
    end = deadline_s if deadline_s is not None else math.inf
    began = ~np.isnan(tx_start)
    arrived = ~np.isnan(tx_end)
    if deadline_s is not None:
        arrived &= tx_end <= deadline_s
    started = np.flatnonzero(began)
    order = started[np.argsort(tx_start[started], kind="stable")]
    stop = np.where(arrived, tx_end, np.where(began, min(t, end), math.nan))
    on_air_s = np.where(began, stop - tx_start, 0.0)
    end_s = float(np.nanmax(stop)) if started.size else (t if k else 0.0)
    if deadline_s is not None and not arrived.all():
        end_s = deadline_s
    return UplinkSchedule(order, tx_start, arrived, end_s, tx_end=np.where(arrived, tx_end, math.nan),
                          on_air_s=on_air_s, attempts=began.astype(np.int64))


class InterferedUplinks(RatesOnTheAir):
    """The event uplink of cells that interfere (wirelessfl.access.EventUplink): under TDMA one
    transmitter at a time per cell, first come first served; on shared bands (fdma, ofdma) every
    ready device on the air at once, each cell's band split among its devices on the air. Every
    transmission on the air is timed with the others at its SINR rate, recomputed whenever one starts
    or ends."""

    def __init__(self, host, cells):
        super().__init__(host)
        self.cells = cells
        self.shared = bool(cells.accesses[0].concurrent)
        self.queues = None if self.shared else [Band(host.env) for _ in range(cells.count)]
        self.cross: dict[int, np.ndarray] = {}  # an upload's gains to every site, drawn as it went on the air
        self.fading: dict[int, np.ndarray] = {}  # an OFDMA upload's block factors, drawn as it went on the air
        self.draws = self.shared and provides(cells.accesses[0], DrawsBlockFading)  # every cell's scheme is alike
        self.loss = np.zeros(0)  # the SINR loss of each active upload, since t_last
        link = cells.accesses[0].link
        self.bandwidth_hz, self.noise_power = link.bandwidth_hz, link.noise_power
        self.blocks = cells.blocks  # fading within uploads: each upload's block (None: one gain an upload)

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): wait for its cell's transmitter (TDMA), then send
        its bits at the rates the sub-band allows. Returns True."""
        if self.shared:
            self._go_on_air(u)
            return (yield from self._until_sent(u))
        if u.phase != ON_AIR:  # a resumed request keeps its place
            queue(self.host, u)
        with self.queues[self.cells.serving[u.device]].request() as slot:
            yield slot
            self._go_on_air(u)
            return (yield from self._until_sent(u))

    def _go_on_air(self, u) -> None:
        host, cells = self.host, self.cells
        if u.done is None:
            u.done = host.env.event()
        if u.phase != ON_AIR:
            u.phase = ON_AIR
            host.start_transmission(u)
            u.bits_left, u.attempts = float(u.bits), 1
            self.cross[u.seq] = cells.cross_gains(u.device)
            fading = cells.access_of(u.device).block_fading(1) if self.draws else None
            if fading is not None:
                self.fading[u.seq] = fading[0]
            if self.blocks is not None:
                self.blocks.start(u.seq, u.device, u.gain, host.env.now)
                self._arm_block(u)
            self._join(u)

    def _arm_block(self, u) -> None:
        """Wake when ``u``'s next fading block begins (an out-of-date wake-up does nothing)."""
        at = self.blocks.next_s(u.seq)
        block = self.blocks.state[u.seq][3]
        event = self.host.env.at(max(at, self.host.env.now), priority(RANK_DEVICE, u.seq))
        event.callbacks.append(lambda _: self._next_block(u, block))

    def _next_block(self, u, block: int) -> None:
        state = self.blocks.state.get(u.seq)
        if state is None or state[3] != block:  # it left the air, or this block was already entered
            return
        self._advance()
        self.blocks.step(u.seq)
        self._reschedule()
        self._arm_block(u)

    def on_air_until(self, u, t: float) -> float:
        return t - u.tx_start_s

    def _leave(self, u) -> None:
        super()._leave(u)
        self.cross.pop(u.seq, None)
        self.fading.pop(u.seq, None)
        if self.blocks is not None:
            self.blocks.stop(u.seq)

    def _elapsed(self, dt: float) -> None:
        """Each active upload's cell counts its SINR loss over ``dt``."""
        self.cells.meter.add(np.array([self.cells.serving[u.device] for u in self.active]), self.loss, dt)

    def _rates_now(self) -> list[float]:
        cells, active = self.cells, self.active
        serving = np.array([cells.serving[u.device] for u in active])
        power = np.array([u.power for u in active])
        gains = np.array([u.gain if self.blocks is None else self.blocks.gain(u.seq) for u in active])
        cross = np.array([self.cross[u.seq] for u in active])
        if self.shared:
            fading = np.array([self.fading[u.seq] for u in active]) if self.fading else None
            rates, self.loss = shared_band_rates(serving, cells.sites.bands, cells.accesses, np.arange(len(active)),
                                                 power, gains, cross, fading)
        else:
            rates, self.loss = sinr_rates(serving, cells.sites.bands, power, gains, cross, self.bandwidth_hz,
                                          self.noise_power)
        return rates.tolist()

    def state_dict(self) -> dict:
        """The uploads on the air in order, their gains to every site and block factors, and when
        their bits were last counted."""
        return {"active": [u.seq for u in self.active], "t_last": self.t_last,
                "cross": {seq: g.tolist() for seq, g in self.cross.items()},
                "fading": {seq: f.tolist() for seq, f in self.fading.items()},
                **({"blocks": self.blocks.state_dict()} if self.blocks is not None else {})}

    def load_state(self, state: dict) -> None:
        """Restore the uploads on the air (after the engine restored the updates)."""
        self.active = [self.host.update(seq) for seq in state["active"]]
        self.cross = {int(seq): np.array(g) for seq, g in state["cross"].items()}
        self.fading = {int(seq): np.array(f) for seq, f in state.get("fading", {}).items()}
        self.t_last = float(state["t_last"])
        for u in self.active:
            if u.done is None:
                u.done = self.host.env.event()
        if self.blocks is not None:
            self.blocks.load_state(state["blocks"])
            for u in self.active:
                self._arm_block(u)
        self._reschedule()
