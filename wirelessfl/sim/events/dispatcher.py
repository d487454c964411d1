"""Starting devices under the event protocols: the slots the protocol asked for, filled with the
devices the scheduler's dispatch rule picks (wirelessfl.scheduling ``dispatch``), each checked and
given its computation time and energy, then launched by the engine. Slots that no idle, available
device can fill now stay wanted until one can (an availability step, or a device that frees)."""
from __future__ import annotations

import math
from operator import index

import numpy as np

from ...capabilities import provides
from ...devices import ComputeEnergy, energy_of
from ...scheduling.base import DispatchesOne, DispatchState
from ...wireless import moving
from .rounds import numbers_only

__all__ = ["Dispatcher"]

_INT64 = np.dtype(np.int64)  # a dispatch of these needs no conversion


def shortcut(scheduler):
    """The dispatch rule's shortcut for one freed slot (DispatchesOne: no arrays), where it stands
    for the rule: defined by the class that defines ``dispatch`` or by one below it. A subclass that
    overrides ``dispatch`` alone is asked its own rule every time."""
    if not provides(scheduler, DispatchesOne):
        return None
    mro = type(scheduler).__mro__

    def owner(name: str) -> int:
        return next(i for i, klass in enumerate(mro) if name in klass.__dict__)

    return scheduler.dispatch_one if owner("dispatch_one") <= owner("dispatch") else None


class Dispatcher:
    """The engine's dispatch: ``want(k)`` asks for k more devices, ``fill()`` starts what it can.
    Its state is the slots still wanted and the dispatch rule's latest facts (``info``, which the
    aggregations' rows of rounds.csv carry)."""

    def __init__(self, engine):
        self.engine = engine
        parts, flights = engine.parts, engine.flights
        self.wanted = 0  # slots the protocol asked for and no device could fill yet
        self.info: dict = {}
        gain = parts.channel.mean_gain()
        self.mean_gains = np.ones(engine.num_devices) if gain is None else np.array(gain, dtype=float)
        self.moving = moving(parts.channel)  # moving devices: the rule sees the mean gains of where they are
        # without an energy model (the contract's zeros): no call per device
        self._energy = getattr(parts.compute, "has_energy", None)
        if self._energy is None:
            self._energy = provides(parts.compute, ComputeEnergy)
        # one device's time as one scalar draw, where the model has the method (ComputeModel.compute_time)
        self.compute_time = getattr(parts.compute, "compute_time", None)
        self.dispatch_one = shortcut(parts.scheduler)
        link = parts.access.link
        self.state = DispatchState(  # one object, brought up to date at each dispatch (arrays: the engine's own)
            time_s=0.0, version=0, slots=0, busy=flights.busy, waiting=flights.waiting, num_busy=0, available=None,
            last_applied=engine.server.last_applied, mean_gains=self.mean_gains, model_bits=parts.upload_bits,
            bandwidth_hz=link.bandwidth_hz, noise_power=link.noise_power,
            per_aggregation=engine.per_aggregation, interval_s=math.nan, rng=engine.streams["selection"],
            access=parts.access)

    def want(self, k: int) -> int:
        """``k`` more slots; returns how many devices started now."""
        self.wanted += int(k)
        return self.fill()

    def fill(self) -> int:
        """Start the devices the dispatch rule picks for the slots still wanted; how many started."""
        e = self.engine
        if e.stopping or self.wanted <= 0:
            return 0
        parts, state, now, server, flights = e.parts, self.state, e.env.now, e.server, e.flights
        if self.moving:
            parts.channel.set_time(now)
            e.handovers.check()
            self.mean_gains[:] = parts.channel.mean_gain()
        version = server.version
        state.time_s, state.version, state.slots, state.available = now, version, self.wanted, e.availability.available
        state.busy, state.num_busy, state.last_applied = flights.busy, len(flights.flying), server.last_applied
        state.interval_s = server.last_aggregation_s / version if version else math.nan
        if self.dispatch_one is not None:
            one = self.dispatch_one(state)
            if one is not None:
                try:
                    device, power, info = one
                    device, power = index(device), float(power)
                    if not isinstance(info, dict):
                        raise TypeError
                except (TypeError, ValueError):
                    raise ValueError(f"scheduler.name: {type(parts.scheduler).__name__}.dispatch_one returned {one!r}: "
                                     "(device, power, info) with an integer device, a number power and a dict, "
                                     "or None") from None
                return self._start_one(device, power, info, method="dispatch_one")
        choice = parts.scheduler.dispatch(state)
        devices = choice.devices
        if not (type(devices) is np.ndarray and devices.dtype is _INT64 and devices.ndim == 1):
            devices = np.asarray(devices, dtype=np.int64).reshape(-1)
        chosen = devices.tolist()
        if not chosen:
            return 0
        if len(chosen) == 1:  # one device, one launch
            power = choice.power.item(0) if type(choice.power) is np.ndarray else float(choice.power[0])
            return self._start_one(chosen[0], power, choice.info, choice.frequency)
        return self._start_many(chosen, devices, choice)

    def _start_one(self, device: int, power: float, info: dict, frequency=None, method: str = "dispatch") -> int:
        e = self.engine
        available = e.available
        if not 0 <= device < e.num_devices or e.flights.busy[device] or (
                available is not None and not available[device]):
            self._bad([device], method)
        self.info = info
        key = e.flights.work_key(device, e.server.version)
        if frequency is None and self.compute_time is not None:  # the usual: one scalar draw
            comp = [self.compute_time(device, e.streams["compute"], key)]
            energy = self.work_energy(np.array([device]), key, comp) if self._energy else [0.0]
        else:
            comp, energy = self.work(np.array([device]), key, frequency)
        if e.checks.scheduler is not None:
            e.checks.dispatch_power(power, device, f"t = {e.env.now:.6g} s")
        down = self.downlink([device])[0] if e.parts.downlink.timed else None  # the usual: a fixed downlink
        e.tasks.launch(device, power, comp[0], energy[0], key=key, bits=e.parts.upload_bits, downlink=down)
        self.wanted -= 1
        return 1

    def _start_many(self, chosen: list, devices: np.ndarray, choice) -> int:
        e = self.engine
        busy, available = e.flights.busy, e.available
        if len(chosen) > self.wanted or len(set(chosen)) != len(chosen) or \
                any(not 0 <= d < e.num_devices or busy[d] for d in chosen) or (
                available is not None and not all(available[d] for d in chosen)):
            self._bad(chosen)
        self.info = choice.info
        power = choice.power.tolist() if isinstance(choice.power, np.ndarray) else list(choice.power)
        if e.checks.scheduler is not None:
            if len(power) != len(chosen):
                self._bad(chosen)
            for device, p in zip(chosen, power):
                e.checks.dispatch_power(float(p), device, f"t = {e.env.now:.6g} s")
        keys = [e.flights.work_key(device, e.server.version) for device in chosen]
        frequency = choice.frequency
        if len(set(keys)) == 1:  # the usual case: one call for the devices started now
            comp, energy = self.work(devices, keys[0], frequency)
        else:  # a device started again from this version: its own key (its own draws of local work)
            comp, energy = [], []
            for i, key in enumerate(keys):
                c, en = self.work(devices[i:i + 1], key, None if frequency is None else frequency[i:i + 1])
                comp, energy = comp + c, energy + en
        down = self.downlink(chosen) or [None] * len(chosen)
        for device, p, c, en, key, d in zip(chosen, power, comp, energy, keys, down):
            e.tasks.launch(device, p, c, en, key=key, bits=e.parts.upload_bits, downlink=d)
        self.wanted -= len(chosen)
        return len(chosen)

    def downlink(self, devices: list) -> list | None:
        """What the timed downlink did for ``devices`` started together now (one broadcast, or a
        unicast each), at their gains drawn now and a fresh gain for each retransmission, as an
        upload's: (seconds, transmissions, received) per device (None: the downlink is not timed)."""
        e = self.engine
        downlink = e.parts.downlink
        if not downlink.timed:
            return None

        def gains(which) -> np.ndarray:
            return np.array([e.tasks.draw_gain(devices[i]) for i in which], dtype=float)

        d = downlink.deliver(e.parts.downlink_bits, gains(range(len(devices))), e.streams["downlink"], redraw=gains)
        return list(zip(d.seconds.tolist(), d.attempts.tolist(), d.received.tolist()))

    def _bad(self, chosen: list, method: str = "dispatch") -> None:
        e = self.engine
        raise ValueError(f"scheduler.name: {type(e.parts.scheduler).__name__}.{method} returned {chosen}: "
                         f"at most {self.wanted} distinct idle, available devices of 0 to {e.num_devices - 1}")

    def work(self, devices: np.ndarray, key: int, frequency=None) -> tuple[list, list]:
        """(computation times, computation energies) of devices started now with work key ``key``, at
        the dispatch's CPU ``frequency`` (one per device) where it gives one."""
        compute, rng = self.engine.parts.compute, self.engine.streams["compute"]
        if frequency is not None:
            frequency = np.asarray(frequency, dtype=float).reshape(-1)
            if frequency.shape != devices.shape or not (np.isfinite(frequency) & (frequency > 0)).all():
                raise ValueError(f"scheduler.name: {type(self.engine.parts.scheduler).__name__}.dispatch returned "
                                 f"frequencies {frequency.tolist()} for devices {devices.tolist()}: one finite "
                                 "frequency > 0 (Hz) per device")
            comp, energy = compute.at_frequency(devices, frequency, round_idx=key)
            return np.asarray(comp, dtype=float).tolist(), np.asarray(energy, dtype=float).tolist()
        comp = compute.compute_times(devices, rng, round_idx=key)
        if not (type(comp) is np.ndarray and comp.dtype == np.float64):
            comp = np.asarray(comp, dtype=float)
        comp = comp.tolist()
        return comp, self.work_energy(devices, key, comp) if self._energy else [0.0] * len(devices)

    def work_energy(self, devices: np.ndarray, key: int, times_s: list) -> list:
        """The computation energy of devices started now with work key ``key`` (the model has one),
        given the times just drawn for them."""
        energy = energy_of(self.engine.parts.compute, devices, key, np.asarray(times_s, dtype=float))
        return np.asarray(energy, dtype=float).tolist()

    def state_dict(self) -> dict:
        """The slots still wanted and the rule's latest facts (numbers only)."""
        return {"wanted": self.wanted, "dispatch_info": numbers_only(self.info)}

    def load_state(self, state: dict) -> None:
        """Restore them."""
        self.wanted = int(state["wanted"])
        self.info = dict(state["dispatch_info"])
