"""The model each device last received, for link.downlink_miss = "stale": a device that misses the
model trains from the last one it got, and its update counts the versions in between as staleness.

Each device keeps a version number; the models are kept once per version still some device's last
(a reference to the server's tensor, which an aggregation replaces rather than changes), so memory
grows with the distinct versions devices hold, at most one model per device. Version 0, the initial
model, is every device's until it receives another."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["LastModels"]


class LastModels:
    """Per device, the version of the last model it received, and those models."""

    def __init__(self, num_devices: int, initial: Any):
        self.version = np.zeros(num_devices, dtype=np.int64)
        self.models: dict[int, Any] = {0: initial}  # None in timing-only runs: versions only

    def received(self, device: int, version: int, model: Any) -> None:
        """``device`` got ``model``, the server's version ``version``."""
        old = int(self.version[device])
        if old == version:
            return
        self.version[device] = version
        self.models.setdefault(version, model)
        if not (self.version == old).any():  # nobody holds it any more
            del self.models[old]

    def start(self, u, version: int, model: Any) -> None:
        """The task ``u`` starts: the device got ``model`` (the server's ``version``), or, when it
        missed it, trains from the last model it got and is as stale as that model."""
        if u.received:
            self.received(u.device, version, model)
        else:
            u.version, u.start = self.last(u.device)

    def last(self, device: int) -> tuple[int, Any]:
        """(version, model) of the last model ``device`` received."""
        version = int(self.version[device])
        return version, self.models[version]

    def state_dict(self) -> dict:
        """The versions and the models they name."""
        return {"version": self.version.copy(), "models": dict(self.models)}

    def load_state(self, state: dict) -> None:
        """Restore them."""
        self.version = np.asarray(state["version"], dtype=np.int64).copy()
        self.models = {int(v): m for v, m in state["models"].items()}
