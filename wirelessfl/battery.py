"""Batteries: each device's charge in joules, drawn by what it spends and refilled by what it
harvests; the availability model ``devices.availability = "battery"``. Knows nothing of SimPy.

A step (a round under sync, ``devices.availability_period_s`` seconds under the event protocols,
as for the Markov chain) first adds the energy harvested since the last one, then says who is
available: the devices holding at least ``threshold`` of their capacity. Between steps a device's
charge falls at the rate of what it is doing (the engines set the rate of each phase of a task:
receiving the model, computing, on the air, idle), so its charge is piecewise linear in time, and
the time it would empty is known the moment a rate is set (``empties_at``). A device that empties
during a task loses that update (outcome "battery") and stays unavailable until a step finds it
above the threshold again. docs/energy.md has the model and the options.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .harvest import BernoulliHarvest, Harvest, NoHarvest, PoissonHarvest, TraceHarvest, checked_income
from .traces import Trace

__all__ = ["HARVESTS", "Battery", "NO_BATTERY", "NoBattery", "build_battery", "or_no_battery"]

HARVESTS = ("none", "bernoulli", "poisson", "trace")
"""The built-in harvest laws (wirelessfl.harvest): energy arrives per step never; ``harvest_j``
with probability ``harvest_p``; a Poisson number (mean ``harvest_mean``) of ``harvest_j`` each; the
joules of a trace's row. ``devices.harvest`` may also name a part of one's own."""


class Battery:
    """The charge of N devices (joules), with ``capacity_j`` each; available when the charge is at
    least ``threshold`` x capacity at a step (``step``), and unavailable as soon as a task leaves it
    below that (``idle``).

    The charge of device n at time t is ``charge[n] - rate[n] * (t - since[n])``: the engines call
    ``set_rate`` as a device's task goes from one phase to the next, which settles the charge so far.
    """

    present = True  # (NoBattery: False)

    def __init__(self, num_devices: int, capacity_j: float, initial_j: float, threshold: float,
                 harvest: "str | Harvest" = "none", harvest_j: float = 0.0, harvest_p: float = 0.0,
                 harvest_mean: float = 0.0, trace: Trace | None = None, rx_power_w: float = 0.0):
        """``harvest``: a harvest part (wirelessfl.harvest.Harvest), or a built-in's name with its
        numbers (``harvest_j``, ``harvest_p``, ``harvest_mean``, ``trace``)."""
        if isinstance(harvest, str):
            harvest = _builtin_harvest(harvest, num_devices, harvest_j, harvest_p, harvest_mean, trace)
        if not 0 <= initial_j <= capacity_j:
            raise ValueError("need 0 <= initial_j <= capacity_j")
        n = self.num_devices = int(num_devices)
        self.capacity_j, self.threshold_j = float(capacity_j), float(threshold) * float(capacity_j)
        self.harvest, self.rx_power_w = harvest, float(rx_power_w)
        self.charge = np.full(n, float(initial_j))
        self.rate = np.zeros(n)          # joules per second being drawn now
        self.since = np.zeros(n)         # when ``charge`` was settled
        self.available = self.charge >= self.threshold_j
        self.steps = 0                   # steps taken (the trace's next row)
        self.harvested_j = np.zeros(n)   # energy that arrived (after the capacity's cut)
        self.emptied = np.zeros(n, dtype=np.int64)  # tasks lost to an empty battery, per device
        self.clock: Callable[[], float] = lambda: 0.0  # the engine's time, for ``round_info``

    # --- steps -------------------------------------------------------------------------------

    def step(self, rng: np.random.Generator) -> np.ndarray:
        """The energy harvested since the last step arrives (the harvest part's, drawn from ``rng``),
        cut at the capacity; returns who is available from now on (a copy). The charges of devices at
        work must be settled to the step's time first (``settle``)."""
        income = checked_income(self.harvest, self.harvest.harvest(self.steps, float(self.clock()), rng),
                                self.num_devices, self.steps)
        if income is not None:
            before = self.charge.copy()
            np.minimum(self.charge + income, self.capacity_j, out=self.charge)
            self.harvested_j += self.charge - before
        self.steps += 1
        self.available = self.charge >= self.threshold_j
        return self.available.copy()

    @property
    def exhausted(self) -> bool:
        """No device will ever be available again: all below the threshold, and nothing harvested."""
        return not self.harvest.arrives and not (self.charge >= self.threshold_j).any()

    # --- draining (the engines) -------------------------------------------------------------

    def charge_at(self, device: int, now: float) -> float:
        """Device ``device``'s charge at ``now`` (not below 0)."""
        return max(self.charge[device] - self.rate[device] * (now - self.since[device]), 0.0)

    def settle(self, now: float) -> None:
        """Bring every device's charge to ``now`` (those at work)."""
        busy = self.rate > 0
        if busy.any():
            self.charge[busy] = np.maximum(self.charge[busy] - self.rate[busy] * (now - self.since[busy]), 0.0)
            self.since[busy] = now

    def set_rate(self, device: int, rate_w: float, now: float) -> float:
        """From ``now`` on, ``device`` draws ``rate_w`` watts; returns when it would empty at that
        rate (inf: never). Setting the rate it already draws changes nothing (a resumed task)."""
        if rate_w == self.rate[device]:  # the same line on: re-anchoring it would only move the last digits
            return self.empties_at(device)
        self.charge[device] = self.charge_at(device, now)
        self.rate[device], self.since[device] = rate_w, now
        return self.empties_at(device)

    def take(self, device: int, joules: float, now: float) -> bool:
        """``joules`` more leave ``device``'s battery at ``now`` (a transmission above the listening draw
        of a contention scheme); returns whether that emptied it."""
        self.charge[device] = self.charge_at(device, now) - joules
        self.since[device] = now
        return self.charge[device] <= 0.0

    def empties_at(self, device: int) -> float:
        """When ``device`` empties at its present rate (inf: it draws nothing)."""
        rate = self.rate[device]
        return self.since[device] + self.charge[device] / rate if rate > 0 else math.inf

    def idle(self, device: int, now: float) -> None:
        """``device``'s task is over: it draws nothing, and it is unavailable if below the threshold."""
        self.set_rate(device, 0.0, now)
        if self.charge[device] < self.threshold_j:
            self.available[device] = False

    def empty(self, device: int, now: float) -> None:
        """``device`` ran out during a task: its charge is 0, the task is lost, it is unavailable."""
        self.charge[device], self.rate[device], self.since[device] = 0.0, 0.0, now
        self.available[device] = False
        self.emptied[device] += 1

    # --- a round in closed form (sync) ---------------------------------------------------------

    def closed_round(self, devices: np.ndarray, downlink_s: float, comp_s: np.ndarray, comp_j: np.ndarray,
                     airtime_s: np.ndarray, power: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A sync round of ``devices`` (each receives the model for ``downlink_s``, computes for
        ``comp_s`` spending ``comp_j``, then is on the air for ``airtime_s`` at ``power``; waiting
        for the uplink costs nothing), against their charges: returns (computation times, computation
        energies, airtimes, emptied), each task cut where its battery runs out. A device that empties
        before its upload sends nothing (airtime 0); one that empties on the air stops there. The
        charges are not changed (``spend`` does that once the round's energies are known)."""
        left = self.charge[devices] - self.rx_power_w * downlink_s  # after the broadcast
        with np.errstate(divide="ignore", invalid="ignore"):
            done = np.where(comp_j > 0, np.clip(left / comp_j, 0.0, 1.0), (left >= 0).astype(float))
            computing = left < comp_j
            left = left - comp_j
            sendable = np.where(power > 0, np.maximum(left, 0.0) / power, np.inf)
        emptied = computing | (left < power * airtime_s)
        comp_s = np.where(computing, comp_s * done, comp_s)
        comp_j = np.where(computing, comp_j * done, comp_j)
        airtime_s = np.where(computing, 0.0, np.minimum(airtime_s, sendable))
        return comp_s, comp_j, airtime_s, emptied

    def spend(self, devices: np.ndarray, joules: np.ndarray, emptied: np.ndarray) -> None:
        """Draw a round's energies from ``devices``' batteries (the emptied ones are 0)."""
        charge = np.maximum(self.charge[devices] - joules, 0.0)
        self.charge[devices] = np.where(emptied, 0.0, charge)
        self.emptied[devices] += emptied

    # --- records and checkpoints ----------------------------------------------------------------

    def charges_now(self) -> np.ndarray:
        """Every device's charge at the engine's time (``clock``), the ones at work drawn down to it."""
        return np.maximum(self.charge - self.rate * (self.clock() - self.since), 0.0)

    def round_info(self) -> dict:
        """rounds.csv's battery columns: the mean charge now, and how many devices are below the threshold."""
        charge = self.charges_now()
        return {"battery_mean_j": float(charge.mean()), "battery_low": int((charge < self.threshold_j).sum())}

    def device_columns(self) -> dict:
        """devices.csv's battery columns: the final charge, the energy harvested, the tasks lost."""
        return {"battery_j": self.charges_now(), "harvested_j": self.harvested_j.copy(),
                "battery_lost": self.emptied.copy()}

    def state_dict(self) -> dict:
        """The charges, rates, availability and counters."""
        state = {"charge": self.charge.copy(), "rate": self.rate.copy(), "since": self.since.copy(),
                 "available": self.available.copy(), "steps": self.steps, "harvested_j": self.harvested_j.copy(),
                 "emptied": self.emptied.copy()}
        harvest = self.harvest.state_dict()
        return {**state, "harvest": harvest} if harvest else state  # a built-in's: nothing (checkpoints as they were)

    def load_state(self, state: dict) -> None:
        """Inverse of state_dict."""
        for name in ("charge", "rate", "since", "harvested_j"):
            setattr(self, name, np.asarray(state[name], dtype=float).copy())
        self.available = np.asarray(state["available"], dtype=bool).copy()
        self.emptied = np.asarray(state["emptied"], dtype=np.int64).copy()
        self.steps = int(state["steps"])
        if "harvest" in state:
            self.harvest.load_state(state["harvest"])


def _builtin_harvest(name: str, num_devices: int, joules: float, p: float, mean: float, trace: Trace | None):
    """A built-in harvest law by name, with its numbers."""
    if name not in HARVESTS:
        raise ValueError(f"harvest must be one of {HARVESTS} or a wirelessfl.harvest.Harvest, got {name!r}")
    if name == "bernoulli":
        return BernoulliHarvest(num_devices, joules, p)
    if name == "poisson":
        return PoissonHarvest(num_devices, joules, mean)
    return TraceHarvest(trace) if name == "trace" else NoHarvest()


class NoBattery:
    """The devices have no batteries (Parts.battery's default): nothing runs out, nothing is cut,
    nothing is drawn, so the engines ask it as they ask batteries; ``present`` says which it is."""

    present = False
    rx_power_w = 0.0
    exhausted = False

    def closed_round(self, devices: np.ndarray, downlink_s: float, comp_s: np.ndarray, comp_j: np.ndarray,
                     airtime_s: np.ndarray, power: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, None]:
        """Every task as it is; nobody emptied (None)."""
        return comp_s, comp_j, airtime_s, None


NO_BATTERY = NoBattery()
"""The one 'no batteries' (Parts.battery's default)."""


def or_no_battery(battery: "Battery | NoBattery | None") -> "Battery | NoBattery":
    """A battery handed over by a caller, with None (the old spelling of "none") as NO_BATTERY."""
    return NO_BATTERY if battery is None else battery


def build_battery(scenario) -> Battery | None:
    """The scenario's batteries (None unless ``devices.availability = "battery"``), filled by its
    harvest part (``devices.harvest``)."""
    from .plugins import registry

    dc = scenario.devices
    if dc.availability != "battery":
        return None
    harvest = registry("harvest").load(dc.harvest, scenario.plugin_path).from_scenario(scenario,
                                                                                        scenario.options("harvest"))
    initial = dc.battery_capacity_j if dc.battery_initial_j is None else dc.battery_initial_j
    return Battery(dc.count, dc.battery_capacity_j, initial, dc.battery_threshold, harvest, rx_power_w=dc.rx_power_w)
