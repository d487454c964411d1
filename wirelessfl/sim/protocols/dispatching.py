"""What fedbuff and fedasync share: ``concurrency`` devices in flight, a new one, picked by the
scheduler's dispatch rule, whenever a slot frees; updates staler than ``max_staleness`` dropped as
they arrive."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np

from ...fields import ConfigError, option
from ...outcomes import Outcome
from .base import RoundProtocol, require_stale_updates
from .staleness import StalenessOptions

__all__ = ["DispatchOptions", "Dispatching"]


@dataclass(frozen=True)
class DispatchOptions(StalenessOptions):
    """Options shared by the protocols that start a device whenever a slot frees."""

    concurrency: int = option(10, ge=1, doc="devices training at any time")


class Dispatching(RoundProtocol):
    """``concurrency`` devices in flight, a new one whenever a slot frees; updates staler than
    ``max_staleness`` dropped on arrival. Subclasses say what an arrival does (``_take``) and how the
    updates of an aggregation weigh (``_weigh``)."""

    name: ClassVar[str] = ""

    def __init__(self, options, plugin_path: Sequence[str] = ()):
        self.options = options
        self.staleness = options.function(plugin_path)
        self._weights: dict[tuple, np.ndarray] = {}

    def weights(self, staleness: tuple) -> np.ndarray:
        """The weight of each update of an aggregation, by their staleness (``_weigh``). Aggregations
        of a few updates repeat the same staleness values, so their weights are kept: s is a
        function of tau alone (wirelessfl.sim.protocols.staleness). Up to 8,192 are kept (about a megabyte):
        one update an aggregation with a thousand devices in flight sees some 5,000 staleness values."""
        weights = self._weights.get(staleness)
        if weights is None:
            weights = self._weigh(np.array(staleness, dtype=float))
            if len(staleness) <= 4:
                if len(self._weights) >= 8192:
                    self._weights.clear()
                self._weights[staleness] = weights
        return weights

    def _weigh(self, staleness: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def from_scenario(cls, scenario, options):
        """The protocol with its options (and the scenario's plugin_path, for its staleness function)."""
        return cls(options, scenario.plugin_path)

    @classmethod
    def check(cls, scenario, options) -> None:
        """Stale updates, a dispatch rule, no more devices in flight than there are, no rounds."""
        require_stale_updates(scenario, cls.name)
        _require_dispatch(scenario, cls.name)
        _require_concurrency(scenario, options.concurrency)
        _no_rounds(scenario, cls.name)

    def start(self, server) -> None:
        server.dispatch(self.options.concurrency)

    def on_arrival(self, server, update) -> None:
        max_staleness = self.options.max_staleness
        if max_staleness is not None and server.version - update.version > max_staleness:
            server.discard(update, Outcome.STALE)
        else:
            self._take(server, update)
        server.dispatch(1)  # the slot this device held

    def _take(self, server, update) -> None:
        raise NotImplementedError

    def on_lost(self, server, update) -> None:
        server.dispatch(1)


def _require_dispatch(scenario, name: str) -> None:
    from ...scheduling.base import has_dispatch

    if not has_dispatch(scenario.part("scheduler")):
        raise ConfigError(f"scheduler.name = {scenario.scheduler.name!r}: has no dispatch rule, which "
                          f"protocol.name = {name!r} needs to start a device whenever a slot frees; use 'uniform' or "
                          "'lyapunov', or protocol.name = 'sync' or 'semi_sync'")


def _no_rounds(scenario, name: str) -> None:
    """The dispatch protocols have no rounds: a round deadline would be ignored, so it is refused."""
    if scenario.run.round_deadline_s is not None:
        raise ConfigError(f"run.round_deadline_s = {scenario.run.round_deadline_s:g}: protocol.name = {name!r} has "
                          "no rounds to end; drop it (protocol.max_staleness bounds how old an applied update may "
                          "be), or use protocol.name = 'sync' or 'semi_sync'")


def _require_concurrency(scenario, concurrency: int) -> None:
    n = scenario.devices.count
    if concurrency > n:
        raise ConfigError(f"protocol.concurrency = {concurrency}: at most devices.count = {n} devices can be "
                          "in flight at once")
