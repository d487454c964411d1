"""devices.csv's per-device totals, summed as the records come: how often each device was selected
(or dispatched), its transmit and computation energy, its dropped uploads, the rounds it was
available in, the sum of its expected power P q (Fig. 7 of the Lyapunov paper) and of its distance
to the base station. Sync rounds add whole vectors; the event protocols' updates are kept in a short
list and added a few thousand at a time, and their availability is counted once per availability
step, not per aggregation (it changes only with a step)."""
from __future__ import annotations

import numpy as np

__all__ = ["DeviceTotals"]

_NEVER = object()  # an availability that never was

SUMS = ("selections", "energy_j", "compute_energy_j", "dropped", "available_rounds", "expected_power_sum")
"""The totals a checkpoint holds, one value per device each (besides distance_sum)."""


class DeviceTotals:
    """The per-device sums of a run (see the module)."""

    def __init__(self, num_devices: int):
        n = self.num_devices = num_devices
        self.selections = np.zeros(n, dtype=np.int64)
        self.energy_j = np.zeros(n)  # transmit energy
        self.compute_energy_j = np.zeros(n)
        self.dropped = np.zeros(n, dtype=np.int64)
        self.available_rounds = np.zeros(n, dtype=np.int64)
        self.expected_power_sum = np.zeros(n)  # sum over rounds of P q
        self.distance_sum = np.zeros(n)  # moving devices: their distance at each record
        self._pending: list[tuple] = []  # updates' totals not yet added to the arrays above
        # aggregations counted at the current availability, not yet added to available_rounds
        self._available, self._available_since, self._available_sum, self._available_count = None, _NEVER, 0, 0
        # a resumed run: the availability the interrupted one had counted since its last step, and that
        # step's next one (the availability a step gives is counted as the step gave it, also where a
        # battery running out changes who is available before the next step)
        self._restored: tuple | None = None
        self._sources: set = set()  # the availability models counted (several: edge servers' engines)

    # --- sync rounds -----------------------------------------------------------------------------

    def add_round(self, selected: np.ndarray, energy_j: np.ndarray, compute_energy_j, lost) -> None:
        """A round's selected devices, their transmit and computation energy (None: none) and the
        devices whose uploads were lost (None: nobody)."""
        self.selections[selected] += 1
        self.energy_j[selected] += energy_j
        if compute_energy_j is not None:
            self.compute_energy_j[selected] += compute_energy_j
        if lost is not None:
            self.dropped[lost] += 1

    def add_available(self, available: np.ndarray | None) -> None:
        """One round at this availability (None: everyone)."""
        self.available_rounds += 1 if available is None else available

    # --- the event protocols' updates ------------------------------------------------------------------

    def add_update(self, device: int, energy_j: float, compute_energy_j: float, power: float, dropped: bool) -> None:
        """One update whose fate is known (``power``: what it adds to the expected power)."""
        self._pending.append((device, energy_j, compute_energy_j, power, dropped))
        if len(self._pending) >= 4096:
            self.fold()

    def fold(self) -> None:
        """Add the updates kept since the last fold (in order, so each device's sums are the ones a
        running total gives) and the aggregations counted at the current availability."""
        self._fold_available()
        if not self._pending:
            return
        devices, energy, compute_energy, power, dropped = zip(*self._pending)
        self._pending = []
        idx = np.asarray(devices, dtype=np.int64)
        np.add.at(self.selections, idx, 1)
        np.add.at(self.energy_j, idx, energy)
        np.add.at(self.compute_energy_j, idx, compute_energy)
        np.add.at(self.expected_power_sum, idx, power)
        np.add.at(self.dropped, idx, np.asarray(dropped, dtype=np.int64))

    def count_available(self, available: np.ndarray | None, since) -> int:
        """Count one aggregation at this availability, which began at ``since``: aggregations at one
        availability are added to available_rounds together, when it changes. Returns how many
        devices are available."""
        if since != self._available_since or (available is None) != (self._available is None):
            self._fold_available()
            self._available_since = since
            self._available = None if available is None else available.copy()
            if isinstance(since, tuple):
                self._sources.add(since[0])
            restored, self._restored = self._restored, None
            if restored is not None and available is not None and isinstance(since, tuple) and since[-1] == restored[0]:
                self._available = restored[1].copy()  # the same step's availability, as it was counted
            self._available_sum = self.num_devices if available is None else int(self._available.sum())
        self._available_count += 1
        return self._available_sum

    def _fold_available(self) -> None:
        if self._available_count:
            self.available_rounds += (self._available_count if self._available is None
                                      else self._available * self._available_count)
            self._available_count = 0

    # --- devices.csv and checkpoints ---------------------------------------------------------------

    def table(self, rounds: int, own_rounds: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """devices.csv's totals over ``rounds`` rounds (or aggregations); ``own_rounds``: each
        device's own count instead (an edge server's rounds, with edges and a cloud)."""
        self.fold()
        n_rounds = max(rounds, 1) if own_rounds is None else np.maximum(own_rounds, 1)
        return {"selections": self.selections, "selection_rate": self.selections / n_rounds,
                "transmit_energy_j": self.energy_j, "compute_energy_j": self.compute_energy_j,
                "dropped": self.dropped, "available_rate": self.available_rounds / n_rounds,
                "time_avg_power": self.expected_power_sum / n_rounds}

    def state_dict(self) -> dict:
        """Every sum (folded first), and the availability counted since the last step."""
        self.fold()
        counted = None  # one availability model only: edge servers' engines each count their own
        if self._available is not None and isinstance(self._available_since, tuple) and len(self._sources) == 1:
            counted = {"next_step_s": self._available_since[-1], "available": self._available.copy()}
        return {**{key: getattr(self, key).copy() for key in SUMS}, "distance_sum": self.distance_sum.copy(),
                "available_counted": counted}

    def check(self, state: dict) -> str | None:
        """Why a checkpoint's totals cannot be restored (None: they can)."""
        for key in SUMS:
            if np.shape(state.get(key)) != (self.num_devices,):
                return f"the checkpoint's {key} is not one value per device ({self.num_devices})"
        return None

    def load_state(self, state: dict) -> None:
        """Restore the sums."""
        for key in SUMS:
            setattr(self, key, np.asarray(state[key]).copy())
        self.distance_sum = np.asarray(state.get("distance_sum", np.zeros(self.num_devices)), dtype=float).copy()
        counted = state.get("available_counted")
        self._restored = None if counted is None else (counted["next_step_s"],
                                                       np.asarray(counted["available"], dtype=bool))
