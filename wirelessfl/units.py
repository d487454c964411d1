"""Physical units at the edge of the simulator: dBm and dB in, watts and linear ratios inside.

Thermal noise over a band of B Hz with a receiver noise figure NF is
N = N0_psd + NF + 10 log10(B) in dBm, with N0_psd = -174 dBm/Hz (k T at 290 K).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["THERMAL_NOISE_DBM_HZ", "db", "dbm_to_w", "from_db", "noise_power_w", "w_to_dbm"]

THERMAL_NOISE_DBM_HZ = -174.0
"""k T0 at T0 = 290 K in dBm/Hz (10 log10(1.380649e-23 x 290 x 1000) = -173.98, rounded as 3GPP does)."""


def from_db(value_db):
    """10^(x / 10): a ratio in dB as a linear ratio."""
    return 10.0 ** (np.asarray(value_db, dtype=float) / 10.0) if np.ndim(value_db) else 10.0 ** (value_db / 10.0)


def db(ratio):
    """10 log10(x): a linear ratio in dB (-inf for 0)."""
    with np.errstate(divide="ignore"):
        return 10.0 * np.log10(ratio)


def dbm_to_w(value_dbm: float) -> float:
    """A power in dBm as watts."""
    return 10.0 ** ((value_dbm - 30.0) / 10.0)


def w_to_dbm(value_w: float) -> float:
    """A power in watts as dBm."""
    return 10.0 * math.log10(value_w) + 30.0


def noise_power_w(bandwidth_hz: float, noise_figure_db: float, psd_dbm_hz: float = THERMAL_NOISE_DBM_HZ) -> float:
    """Thermal noise plus the receiver's noise figure over ``bandwidth_hz``, in watts."""
    return dbm_to_w(psd_dbm_hz + noise_figure_db + 10.0 * math.log10(bandwidth_hz))
