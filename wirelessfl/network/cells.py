"""Each cell's own uplink, in both timing models: a cell is one instance of the access scheme on its
sub-band, and a device sends only in the cell that serves it. Under sync the round's uploads are
split by cell and each cell's closed form times its own (:meth:`Cells.schedule`); under the event
protocols each cell has its own event uplink, and an upload goes to its device's
(:class:`CellUplinks`). Cells on different sub-bands do not interfere; cells on one do, under TDMA,
FDMA and OFDMA (wirelessfl.network.interference)."""
from __future__ import annotations

import math

import numpy as np

from ..access import ResolvesSlots, UplinkSchedule, block_fading
from ..capabilities import provides
from ..rng import stream
from .interference import InterferedUplinks, LossMeter, UploadBlocks, joint_shared, joint_tdma
from .sites import Sites

__all__ = ["CellUplinks", "Cells", "OneCell", "build_cells"]


class Cells:
    """The cells of a run: the sites, the cell serving each device (N,), and each cell's access
    scheme (built alike, each on a sub-band of B / reuse)."""

    present = True
    """Cells of their own (OneCell: False): the records gain each device's cell."""

    def __init__(self, sites: Sites, serving: np.ndarray, accesses: list, cross_mean: np.ndarray | None = None,
                 cross_fading: bool = True):
        self.sites, self.accesses = sites, list(accesses)
        self.serving = np.asarray(serving, dtype=np.int64)
        # cells on one sub-band interfere (wirelessfl.network.interference): each device's mean gain to
        # every site, whether an Exp(1) factor multiplies it per upload, and each cell's SINR loss
        self.interfering = len(set(sites.bands.tolist())) < sites.count
        self.cross_mean, self.cross_fading = cross_mean, cross_fading
        self.meter = LossMeter(sites.count)
        self.rng: np.random.Generator | None = None  # the "interference" stream (the engine gives it)
        self.blocks = None  # fading within uploads that interfere (UploadBlocks; the engine gives it)

    def use_streams(self, streams: dict, fading) -> None:
        """The engine's random streams: interferers' gains to other sites from "interference"; with
        fading within uploads (``fading``: wirelessfl.fading.BlockFading) that interfere, their blocks
        from "fading"."""
        self.rng = streams["interference"]
        self.blocks = UploadBlocks(fading, streams["fading"]) if fading is not None and self.interfering else None

    def cross_gains(self, device: int) -> np.ndarray:
        """``device``'s gains to every site for one upload (its mean gains, times Exp(1) each)."""
        mean = self.cross_mean[device]
        return mean * self.rng.exponential(1.0, mean.size) if self.cross_fading else mean.copy()

    @property
    def count(self) -> int:
        return self.sites.count

    def members(self, devices: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(cell, positions in ``devices`` of its devices), for the cells that have some, in cell order."""
        cell = self.serving[np.asarray(devices, dtype=np.int64)]
        return [(int(c), np.flatnonzero(cell == c)) for c in np.unique(cell)]

    def access_of(self, device: int):
        """The access scheme of the cell serving ``device``."""
        return self.accesses[self.serving[device]]

    def airtime_s(self, devices: np.ndarray, bits, gains: np.ndarray, power: np.ndarray) -> np.ndarray:
        """Each device's time on the air in its own cell (``gains`` and ``power`` in ``devices``' order;
        ``bits`` one number or one per device), the devices of a cell sharing its band as its scheme says."""
        out = np.empty(len(devices))
        for c, idx in self.members(devices):
            b = bits if np.ndim(bits) == 0 else np.asarray(bits)[idx]
            out[idx] = self.accesses[c].airtime_s(b, gains[idx], power[idx])
        return out

    def send_packets(self, devices: np.ndarray, bits, gains: np.ndarray, power: np.ndarray, streams: dict):
        """Each device's upload in packets in its own cell, cell after cell, by the cell's scheme
        (``AccessScheme.send_packets``, its errors from ``streams``: :func:`packet_stream`): (time on
        the air, transmissions, whether it got through, MCS and HARQ transmissions)."""
        n = len(devices)
        airtime, attempts, delivered = np.empty(n), np.empty(n, dtype=np.int64), np.empty(n, dtype=bool)
        harq = np.empty((n, 2), dtype=np.int64)
        for c, idx in self.members(devices):
            b = bits if np.ndim(bits) == 0 else np.asarray(bits)[idx]
            access = self.accesses[c]
            airtime[idx], attempts[idx], delivered[idx], harq[idx] = access.send_packets(
                b, gains[idx], power[idx], packet_stream(access, streams))
        return airtime, attempts, delivered, harq

    def schedule(self, devices: np.ndarray, ready_s: np.ndarray, airtime_s: np.ndarray,
                 deadline_s: float | None = None, *, bits=None, gains: np.ndarray | None = None,
                 power: np.ndarray | None = None) -> UplinkSchedule:
        """A sync round's uplink: each cell's closed form on its own devices, merged (the order is
        by when uploads started, across cells; the phase ends when the last cell's does); with cells
        that interfere, every cell's queue timed together (``joint_tdma``: the uploads' ``bits``, and
        their ``gains`` and ``power``)."""
        k = len(devices)
        if k == 0:
            return self.accesses[0].schedule(ready_s, airtime_s, deadline_s)
        if self.interfering:
            cross = np.array([self.cross_gains(n) for n in np.asarray(devices).tolist()]).reshape(k, self.count)
            cell, bits = self.serving[devices], np.broadcast_to(bits, (k,))
            if self.accesses[0].concurrent:  # shared bands: OFDMA's block factors for the round, cell by cell
                fading = self._block_fading(cell)
                return joint_shared(cell, self.sites.bands, self.accesses, ready_s, bits, power, gains, cross, fading,
                                    deadline_s, self.meter)
            link = self.accesses[0].link
            return joint_tdma(cell, self.sites.bands, ready_s, bits, power, gains, cross, link.bandwidth_hz,
                              link.noise_power, deadline_s, self.meter, self.blocks, devices)
        tx_start, arrived = np.full(k, math.nan), np.zeros(k, dtype=bool)
        end_s, schedules = -math.inf, []
        for c, idx in self.members(devices):
            s = self.accesses[c].schedule(ready_s[idx], airtime_s[idx], deadline_s)
            tx_start[idx], arrived[idx], end_s = s.tx_start, s.arrived, max(end_s, s.end_s)
            schedules.append((idx, s))
        tx_end = on_air = attempts = None  # where some cell's scheme gives them: the others' defaults
        if any(s.tx_end is not None for _, s in schedules):
            tx_end = tx_start + airtime_s
        if any(s.on_air_s is not None for _, s in schedules):
            on_air, attempts = airtime_s.copy(), np.ones(k, dtype=np.int64)
        for idx, s in schedules:
            if s.tx_end is not None:
                tx_end[idx] = s.tx_end
            if s.on_air_s is not None:
                on_air[idx], attempts[idx] = s.on_air_s, s.attempts
        started = np.flatnonzero(~np.isnan(tx_start))
        order = started[np.argsort(tx_start[started], kind="stable")]
        return UplinkSchedule(order, tx_start, arrived, end_s, tx_end, on_air, attempts)

    def _block_fading(self, cell: np.ndarray) -> np.ndarray | None:
        """Each upload's block factors for a sync round, drawn by its cell's scheme (None: flat blocks)."""
        fading = None
        for c in np.unique(cell).tolist():
            mine = np.flatnonzero(cell == c)
            drawn = block_fading(self.accesses[c], mine.size)
            if drawn is None:
                return None
            if fading is None:
                fading = np.empty((cell.size, drawn.shape[1]))
            fading[mine] = drawn
        return fading

    def event_uplink(self, host):
        """Event protocols: each cell's event uplink, an upload going to its device's; with cells that
        interfere, one uplink timing them together (InterferedUplinks)."""
        if self.interfering:
            return InterferedUplinks(host, self)
        return CellUplinks(self, [access.event_uplink(host) for access in self.accesses])

    def state_dict(self) -> dict:
        """Each cell's access scheme's memory, and the SINR losses counted so far."""
        return {"cells": [access.state_dict() for access in self.accesses], "sinr_loss": self.meter.state_dict()}

    def load_state(self, state: dict) -> None:
        for access, kept in zip(self.accesses, state.get("cells", ())):
            access.load_state(kept)
        if "sinr_loss" in state:
            self.meter.load_state(state["sinr_loss"])


class OneCell:
    """A run's one cell (``Parts.cells`` where the run has no cells of its own): every device served
    by cell 0 through the run's access scheme. It answers what the engines ask of :class:`Cells`,
    each question handed to the scheme whole, so that they ask it alike of one cell and of several."""

    present = False
    count = 1
    interfering = False

    def __init__(self, access, num_devices: int):
        self.accesses = [access]
        self.serving = np.zeros(num_devices, dtype=np.int64)
        self.resolves = provides(access, ResolvesSlots)  # random access: asked once, not every round

    def use_streams(self, streams: dict, fading) -> None:
        """Nothing to draw: no other site hears the uploads."""

    def members(self, devices: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(0, every position in ``devices``), where there are some."""
        return [(0, np.arange(len(devices)))] if len(devices) else []

    def access_of(self, device: int):
        return self.accesses[0]

    def airtime_s(self, devices: np.ndarray, bits, gains: np.ndarray, power: np.ndarray) -> np.ndarray:
        return self.accesses[0].airtime_s(bits, gains, power)

    def send_packets(self, devices: np.ndarray, bits, gains: np.ndarray, power: np.ndarray, streams: dict):
        access = self.accesses[0]
        return access.send_packets(bits, gains, power, packet_stream(access, streams))

    def schedule(self, devices: np.ndarray, ready_s: np.ndarray, airtime_s: np.ndarray,
                 deadline_s: float | None = None, *, bits=None, gains: np.ndarray | None = None,
                 power: np.ndarray | None = None) -> UplinkSchedule:
        """The scheme's closed form; a random-access one is handed who contends and how strongly."""
        access = self.accesses[0]
        if self.resolves:
            return access.schedule(ready_s, airtime_s, deadline_s, received_w=gains * power, devices=devices)
        return access.schedule(ready_s, airtime_s, deadline_s)

    def event_uplink(self, host):
        return self.accesses[0].event_uplink(host)

    def state_dict(self) -> dict:
        return {}

    def load_state(self, state: dict) -> None:
        """The scheme's memory is kept as the run's access scheme's (wirelessfl.sim.round.parts)."""


def packet_stream(access, streams: dict) -> np.random.Generator:
    """The random stream of an upload's packet errors: "harq" under an MCS rate, else "link"."""
    return streams["harq" if access.link.mcs_rate else "link"]


class CellUplinks:
    """The event uplink of several cells (wirelessfl.access.EventUplink): an upload is sent on the
    uplink of the cell serving its device; each cell's uplink keeps its own queue and state."""

    def __init__(self, cells: Cells, uplinks: list):
        self.serving, self.uplinks = cells.serving, uplinks

    def transmit(self, u):
        return (yield from self.uplinks[self.serving[u.device]].transmit(u))

    def on_air_until(self, u, t: float) -> float:
        """How long ``u``, stopped at ``t``, was on the air, as its cell's uplink counts it."""
        own = getattr(self.uplinks[self.serving[u.device]], "on_air_until", None)
        return own(u, t) if own is not None else t - u.tx_start_s

    def state_dict(self) -> dict:
        return {"cells": [uplink.state_dict() for uplink in self.uplinks]}

    def load_state(self, state: dict) -> None:
        for uplink, kept in zip(self.uplinks, state["cells"]):
            uplink.load_state(kept)


def build_cells(scenario, channel) -> Cells | None:
    """The cells of ``scenario`` (None for one cell): each an instance of the access scheme built
    for the cell's sub-band (link.bandwidth_hz / reuse, link.noise_power / reuse), serving the
    devices ``channel`` associated with it; a scheme that draws numbers of its own draws them from
    the stream "cell_access" keyed by its cell."""
    net = scenario.network
    if net.cells == 1:
        return None
    radio = cell_radio(scenario)
    part, options = radio.part("access"), radio.options("access")
    accesses = [part.from_scenario(radio, options) for _ in range(net.cells)]
    for c, access in enumerate(accesses):  # a scheme with draws of its own (OFDMA's blocks): each cell its own stream
        if isinstance(getattr(access, "rng", None), np.random.Generator):
            access.rng = stream(scenario.seed, "cell_access", c)
    return Cells(channel.sites, channel.serving, accesses, channel.cross_mean, net.interference_fading == "rayleigh")


def cell_radio(scenario):
    """The scenario as one cell sees it: its sub-band of the link, B / reuse and N0 / reuse (the
    same scenario for one cell)."""
    r = scenario.network.reuse
    if scenario.network.cells == 1 or r == 1:
        return scenario
    lc = scenario.link
    return scenario.replace(f"link.bandwidth_hz={lc.bandwidth_hz / r!r}", f"link.noise_power={lc.noise_power / r!r}")
