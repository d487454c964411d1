"""Batteries on the event engine's clock: each phase of a task draws its own power (receiving the
model, computing, on the air; nothing while it waits), and a device whose battery runs out during a
task is stopped there (outcome "battery"). The moment it would run out is armed as one of the
engine's timers (``_battery<device>``), so a checkpoint saves it and a resume arms it again; a
harvest at an availability step moves it."""
from __future__ import annotations

import math

from ...access.base import ListensWhileContending
from ...battery import Battery
from ...capabilities import provides
from ...outcomes import Outcome

__all__ = ["BatteryDrain", "TIMER"]

TIMER = "_battery"
"""The engine's timers named ``_battery<device>``: when that device's battery runs out."""


class BatteryDrain:
    """Sets each device's draw as its task moves on, and stops the task when the battery is empty."""

    def __init__(self, engine, battery: Battery, access):
        self.engine, self.battery = engine, battery
        battery.clock = lambda: engine.now
        # on the air: its power; under a scheme that listens while contending, the receiving power
        # until each frame goes (``transmitted``)
        self.sending = self.listening if provides(access, ListensWhileContending) else self.on_air

    def draw(self, u, rate_w: float) -> None:
        """``u``'s device draws ``rate_w`` watts from now (the same rate again: nothing changes)."""
        if u.report:  # reports (probes, losses) are not charged
            return
        e = self.engine
        name = f"{TIMER}{u.device}"
        empty_at = self.battery.set_rate(u.device, rate_w, e.now)
        if empty_at == math.inf:
            e.timers.cancel(name)
        elif e.timers.armed.get(name, (None,))[0] != empty_at:
            e.timers.set(name, empty_at)

    def receiving(self, u) -> None:
        self.draw(u, self.battery.rx_power_w)

    def computing(self, u) -> None:
        self.draw(u, u.compute_energy_full_j / u.compute_s if u.compute_s > 0 else 0.0)

    def on_air(self, u) -> None:
        self.draw(u, u.power)

    def listening(self, u) -> None:
        """``u`` contends for the medium (a scheme that listens while contending): its device listens,
        at the receiving power, and pays each transmission with ``transmitted``."""
        self.draw(u, self.battery.rx_power_w)

    def transmitted(self, u, seconds: float) -> None:
        """``u``'s device sends for ``seconds`` from now at its power, instead of listening: the
        difference leaves its battery at once, and an emptied battery stops the task now (within
        one frame of when it ran dry)."""
        if u.report:
            return
        e, device = self.engine, u.device
        if self.battery.take(device, (u.power - self.battery.rx_power_w) * seconds, e.now):
            self.ran_out(device)
            return
        name = f"{TIMER}{device}"
        empty_at = self.battery.empties_at(device)
        if empty_at == math.inf:
            e.timers.cancel(name)
        else:
            e.timers.set(name, empty_at)

    def done(self, u) -> None:
        """``u``'s task is over, however it ended: its device draws nothing, and below the threshold
        it is unavailable at once."""
        if u.report:
            return
        self.draw(u, 0.0)
        self.battery.idle(u.device, self.engine.now)
        self._mark(u.device)

    def ran_out(self, device: int) -> None:
        """The timer of ``device`` is due: its battery is empty; its task is lost."""
        e = self.engine
        self.battery.empty(device, e.now)
        self._mark(device)
        for u in list(e.flights.flying.values()):
            if u.device == device and not u.report and u.at_device:
                u.process.interrupt(Outcome.BATTERY)
                e.tasks.lose(u, Outcome.BATTERY)
                e.losses.lost("devices", "ran out of battery", "a task needs more energy than a battery holds "
                              "(devices.battery_capacity_j against receiving, computing and sending at the "
                              "scheduler's power); set run.time_budget_s, or give the batteries more")

    def before_step(self) -> None:
        """An availability step is due: the charges of devices at work are brought to now."""
        self.battery.settle(self.engine.now)

    def after_step(self) -> None:
        """A step harvested: the devices at work empty later (their timers move)."""
        e = self.engine
        for u in e.flights.flying.values():
            if not u.report and self.battery.rate[u.device] > 0:
                e.timers.set(f"{TIMER}{u.device}", self.battery.empties_at(u.device))

    def _mark(self, device: int) -> None:
        available = self.engine.available
        if available is not None and not self.battery.available[device]:
            available[device] = False
