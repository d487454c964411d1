"""``fedbuff`` (Nguyen et al. 2022): at most ``concurrency`` devices train at any time; each finished
device uploads over the shared uplink; after ``buffer`` (K) updates the server applies
``server_lr x (1 / K) sum_i s(tau_i) delta_i``; every slot that frees starts a device the scheduler's
``dispatch`` rule picks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...fields import ConfigError, option
from .dispatching import DispatchOptions, Dispatching

__all__ = ["FedBuff", "FedBuffOptions"]


@dataclass(frozen=True)
class FedBuffOptions(DispatchOptions):
    """Options of FedBuff."""

    buffer: int = option(10, ge=1, doc="K: updates per aggregation")
    server_lr: float = option(1.0, gt=0, doc="server step size on the buffer's staleness-weighted mean")


class FedBuff(Dispatching):
    """Buffered asynchronous aggregation: x <- x + server_lr (1 / K) sum_i s(tau_i) delta_i. It holds
    its buffer between events (``state_dict``) and batches K updates (``per_aggregation``)."""

    Options = FedBuffOptions
    name = "fedbuff"

    @classmethod
    def check(cls, scenario, options) -> None:
        """As every dispatching protocol, and a buffer no larger than the devices in flight: the
        buffer holds the updates that arrived since the last aggregation (a model-sized delta each)."""
        super().check(scenario, options)
        if options.buffer > options.concurrency:
            raise ConfigError(f"protocol.buffer = {options.buffer}: at most protocol.concurrency = "
                              f"{options.concurrency}: the buffer holds every arrived update until it is full, so it "
                              "must not outgrow the devices in flight")

    def __init__(self, options: FedBuffOptions, plugin_path: Sequence[str] = ()):
        super().__init__(options, plugin_path)
        self.per_aggregation = float(options.buffer)
        self.buffer: list = []

    def _take(self, server, update) -> None:
        o = self.options
        self.buffer.append(update)
        if len(self.buffer) >= o.buffer:
            buffer, self.buffer = self.buffer, []
            version = server.version
            server.apply(buffer, self.weights(tuple([version - u.version for u in buffer])) if server.trains else None)

    def _weigh(self, staleness: np.ndarray) -> np.ndarray:
        o = self.options
        return o.server_lr * self.staleness(staleness) / o.buffer

    def state_dict(self) -> dict:
        return {"buffer": list(self.buffer)}

    def load_state(self, state: dict) -> None:
        self.buffer = list(state["buffer"])
