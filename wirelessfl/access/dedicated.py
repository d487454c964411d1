"""Dedicated sub-bands: every device sends on a fixed sub-band of its own, whoever else is sending.
The closed form is FDMA's (every device starts when it is ready); the event uplink lets every upload
run on its own (:class:`IndependentUplink`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fields import option
from .base import AccessScheme, AirtimePrice, UploadsOnASubBand
from .fdma import FDMA
from .link import Link, send_alone

__all__ = ["Dedicated", "DedicatedOptions", "IndependentUplink"]


@dataclass(frozen=True)
class DedicatedOptions:
    """Options of the dedicated sub-bands."""

    subbands: int | None = option(None, ge=1, doc="sub-bands the band is cut into, B / subbands Hz each, one per "
                                                  "device (default: devices.count)")


class Dedicated(FDMA, UploadsOnASubBand):
    """Every device sends on a sub-band of its own, B / S Hz with noise N0 / S (S = ``subbands``,
    default one per device), whatever the others do: rate (B / S) log2(1 + g P S / N0), fixed when
    the upload starts. Nobody queues and nobody shares, so uploads never contend; this is the
    "bytes over a per-client bandwidth" of simulators that fix an upload's end at dispatch, here with
    each device's own channel. Under sync every device starts when it is ready (as fdma); under the
    event protocols each upload runs on its own (:class:`IndependentUplink`)."""

    Options = DedicatedOptions
    concurrent = False
    solo_uploads = True
    interferes = False  # which sub-band of another cell a device's own one overlaps is not modelled

    def __init__(self, link: Link, subbands: int):
        super().__init__(link)
        self.subbands = int(subbands)

    @classmethod
    def from_scenario(cls, scenario, options: DedicatedOptions) -> "Dedicated":
        """The scenario's band in ``subbands`` (default devices.count) fixed sub-bands."""
        return cls(Link(scenario.link), options.subbands or scenario.devices.count)

    def rates_bps(self, gain: np.ndarray, power: np.ndarray, fading: np.ndarray | None = None) -> np.ndarray:
        """Each device's rate on its own sub-band, however many send."""
        gain, power = np.broadcast_arrays(np.asarray(gain, dtype=float), np.asarray(power, dtype=float))
        s = self.subbands
        return self.link.bandwidth_hz / s * np.log1p(gain * power * s / self.link.noise_power) / np.log(2.0)

    def upload_s(self, bits: float, gain: float, power: float) -> float:
        """Known when the upload starts: its own sub-band's rate."""
        with np.errstate(divide="ignore"):
            return float(bits / self.rates_bps(np.array([gain]), np.array([power]))[0])

    def upload_link(self) -> Link:
        """The device's own sub-band: B / S Hz, noise N0 / S."""
        return self.link.subband(self.subbands)

    def pricing(self, bits: float, k: int) -> AirtimePrice:
        """One fixed sub-band, whatever k."""
        sub = self.upload_link()
        return AirtimePrice(sub.bandwidth_hz, sub.noise_power)

    def event_uplink(self, host) -> "IndependentUplink":
        """Every upload on its own sub-band."""
        return IndependentUplink(host, self)


class IndependentUplink:
    """Every upload on its own sub-band (``access.Dedicated``): it starts at once and lasts its airtime,
    whoever else is sending."""

    def __init__(self, host, scheme: AccessScheme):
        self.host, self.scheme = host, scheme

    def transmit(self, u):
        """The upload of ``u`` (a SimPy generator): on the air at once for its airtime."""
        return (yield from send_alone(self.host, self.scheme.upload_link(), u))  # on its own sub-band

    def state_dict(self) -> dict:
        return {}

    def load_state(self, state: dict) -> None:
        pass
