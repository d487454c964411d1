"""The airtime a drift-plus-penalty scheduler charges, priced as the access scheme says.

Under one transmitter (tdma) an upload of l bits at power P holds the band for l / (B log2(1 + g P
/ N0)). When k devices send together on shares of the band (fdma, ofdma) each sees B / k with noise
N0 / k; under aircomp the joint upload lasts a fixed time and the power is the channel inversion's.
``wirelessfl.access.AccessScheme.pricing`` gives the band and noise to price with (or the fixed
time), so the Lambert-W power rule (wirelessfl.scheduling.power) and the costs stay in one form.
"""
from __future__ import annotations

import math

import numpy as np

from ..access import AirtimePrice, transmit_power
from .power import powers

_LN2 = math.log(2.0)

__all__ = ["price_of", "priced_power_and_airtime"]


def price_of(state, k: int) -> AirtimePrice:
    """How ``state``'s access scheme prices an upload when k devices send together (no scheme:
    the whole band of ``state.bandwidth_hz`` with noise ``state.noise_power``)."""
    if state.access is None:
        return AirtimePrice(state.bandwidth_hz, state.noise_power)
    return state.access.pricing(state.model_bits, k)


def priced_power_and_airtime(state, gains: np.ndarray, queue: np.ndarray, p_max: np.ndarray, *, V: float,
                             lam: float, k: int, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """(P_n, V lam T_n) for every device: the power minimising V lam T(P) + Z_n P at the scheme's
    price (then what the scheme makes of it, e.g. aircomp's inversion), and its airtime cost, +inf
    for a device that cannot send (no power, or a rate below rounding). k: devices sending together."""
    price = price_of(state, k)
    power = powers(gains, queue, p_max, V=V, lam=lam, model_bits=state.model_bits,
                   bandwidth_hz=price.bandwidth_hz, noise_power=price.noise_power, rule=rule)
    if state.access is not None:
        power = transmit_power(state.access, gains, power)
    if price.fixed_s is not None:
        _finite(V * lam * price.fixed_s, power, V, lam, f"the joint upload's {price.fixed_s:g} s")
        return power, np.where(power > 0, V * lam * price.fixed_s, np.inf)
    # ln(1 + snr), accurate for tiny snr; c / log2(1 + snr) = c ln2 / ln(1 + snr).
    rate = np.log1p(gains * (power / price.noise_power))
    c = V * lam * state.model_bits / price.bandwidth_hz * _LN2
    _finite(c, power, V, lam, f"{state.model_bits:g} bits on {price.bandwidth_hz:g} Hz")
    if c == 0.0:
        return power, np.where(rate > 0, 0.0, np.inf)
    with np.errstate(divide="ignore", over="ignore"):
        return power, c / rate  # rate 0 (no power, or below rounding): +inf


def _finite(price: float, power: np.ndarray, V: float, lam: float, what: str) -> None:
    """ConfigError naming V and lam when the price of airtime, or a power, is not a finite number:
    every device would be left out as if it could not send, and the run would schedule nobody and
    say nothing."""
    bad = np.flatnonzero(~np.isfinite(power))
    if math.isfinite(price) and not bad.size:
        return
    from ..fields import ConfigError

    where = f"the power of device {int(bad[0])} is {float(power[bad[0]])!r}" if bad.size else \
        f"the price of airtime, V lam x {what}, is {price!r}"
    raise ConfigError(f"scheduler.V = {V:g}, scheduler.lam = {lam:g}: {where}, not a finite number; choose smaller "
                      "V or lam (costs must stay finite, or nobody is ever scheduled)")
