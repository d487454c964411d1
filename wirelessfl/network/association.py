"""Which cell serves each device: the ``network.association`` part (docs/networks.md).

``associate(positions_m, sites_m, mean_gain)`` gets the devices' positions (N x 2, metres), the
sites (C x 2) and every device's mean gain to every site (N x C: path loss and shadowing, no fading;
devices.csv's ``gain_site_<c>`` columns) and returns the serving cell of each device (N integers in
0..C-1). The built-ins are "nearest" and "strongest"; a rule of one's own is ``"module:Class"``
(options in ``[network.association_options]``). Handover asks the same part, with the hysteresis
applied: each device's gain to the site serving it comes multiplied by the hysteresis (a ratio),
so a device hands over only where the rule then picks another site.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..fields import NoOptions
from ..plugins import PartError, Registry

__all__ = ["ASSOCIATIONS", "Association", "Nearest", "Strongest", "checked_serving"]


class Association:
    """The contract of a ``network.association`` part. Required: ``from_scenario`` and ``associate``."""

    Options: ClassVar[type | None] = None

    @classmethod
    def from_scenario(cls, scenario, options) -> "Association":
        """Build the rule for ``scenario`` with its options."""
        raise NotImplementedError(f"{cls.__name__}.from_scenario")

    @classmethod
    def check(cls, scenario, options) -> None:
        """Raise ConfigError if the scenario cannot run with this rule."""

    def associate(self, positions_m: np.ndarray, sites_m: np.ndarray, mean_gain: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__}.associate")


class Nearest(Association):
    """The nearest site (ties: the lower index)."""

    Options = NoOptions

    @classmethod
    def from_scenario(cls, scenario, options) -> "Nearest":
        return cls()

    def associate(self, positions_m, sites_m, mean_gain):
        distances = np.hypot(*(positions_m[:, None, :] - sites_m[None, :, :]).transpose(2, 0, 1))
        return np.argmin(distances, axis=1)


class Strongest(Association):
    """The site of strongest mean gain (ties: the lower index)."""

    Options = NoOptions

    @classmethod
    def from_scenario(cls, scenario, options) -> "Strongest":
        return cls()

    def associate(self, positions_m, sites_m, mean_gain):
        return np.argmax(mean_gain, axis=1)


def checked_serving(part, serving, num_devices: int, num_sites: int) -> np.ndarray:
    """An association's answer, checked where it enters: N integers in 0..C-1 (PartError, one line
    naming the part, otherwise)."""
    name = f"{type(part).__name__}.associate"
    try:
        out = np.asarray(serving)
    except (TypeError, ValueError):
        out = np.asarray(None)
    if out.shape != (num_devices,) or not (np.issubdtype(out.dtype, np.integer)
                                           or (np.issubdtype(out.dtype, np.floating) and np.isfinite(out).all()
                                               and (out == np.round(out)).all())):
        raise PartError(f"{name}: must return one cell index (an integer) per device, shape ({num_devices},); got "
                        f"shape {out.shape} of {out.dtype}")
    out = out.astype(np.int64)
    bad = np.flatnonzero((out < 0) | (out >= num_sites))
    if bad.size:
        raise PartError(f"{name}: device {int(bad[0])} got cell {int(out[bad[0]])}; cells are 0..{num_sites - 1}")
    return out


ASSOCIATIONS = Registry("association", "wirelessfl.network.association:Association", {
    "nearest": "wirelessfl.network.association:Nearest",
    "strongest": "wirelessfl.network.association:Strongest",
})
"""Built-in association rules by the name ``network.association`` gives them."""
