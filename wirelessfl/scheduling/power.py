"""Optimal transmit power of the drift-plus-penalty problem (docs/papers/lyapunov.md, "Power (the
paper's Theorem 2)").

Per device the power term of the per-round objective is

    cost(P) = c / log2(1 + g P / N0) + Z P,    c = V lam l / B,   0 <= P <= Pmax,

which is convex in x = 1 + g P / N0 (c ln2 / ln x + Z N0 (x - 1) / g), so the clipped stationary
point is the minimiser. The stationary point solves x (ln x)^2 = A. With u = ln x this is
(u/2) e^(u/2) = sqrt(A)/2, hence u = 2 W0(sqrt(A)/2) and x = e^u = (A/4) / W0(sqrt(A/4))^2.

Everything is done in the log domain so that A may be far outside the floating-point range
(V up to 1e9, Z down to 1e-300, gains at the 1e-3 floor) without overflow, NaN or warnings.
"""
from __future__ import annotations

import math

import numpy as np

POWER_RULES = ("exact", "paper")

_LN2 = float(np.log(2.0))
# Below e^-20 the series W0(z) = z - z^2 + ... is exact to double precision for what we need (the
# error in log(x - 1) is O(z^2)).
_S_LOW = -20.0


def _lambertw_of_exp(s: np.ndarray) -> np.ndarray:
    """W0(e^s) for real s >= -20 of any size (s = log of the argument).

    Newton on f(w) = w + ln w - s from softplus(s) = ln(1 + e^s) >= W0(e^s): f is increasing and
    concave, so the first step lands below the root and the next ones climb to it quadratically.
    Four steps reach a relative error of 4e-15 over the whole range (checked against scipy's
    complex lambertw in the tests; that one is several times slower on the arrays used here).
    """
    w = np.logaddexp(0.0, s)
    s1 = s + 1.0
    for _ in range(4):
        w = (s1 - np.log(w)) / (1.0 + 1.0 / w)  # w - f(w) / f'(w), without overflow
    return w


def _log_xm1(log_a: np.ndarray) -> np.ndarray:
    """log(x - 1) where x > 1 solves x (ln x)^2 = A, given log A (finite)."""
    s = 0.5 * log_a - _LN2  # log(sqrt(A) / 2)
    low = s < _S_LOW
    any_low = low.any()
    two_w = 2.0 * _lambertw_of_exp(np.maximum(s, _S_LOW) if any_low else s)
    # log(e^(2W) - 1) = 2W + log(1 - e^(-2W)): no overflow for large W, no cancellation for small.
    out = two_w + np.log(-np.expm1(-two_w))
    # For tiny z = e^s, 2W = 2z - 2z^2 + O(z^3) so log(x - 1) = ln2 + s + O(z^2).
    return np.where(low, _LN2 + s, out) if any_low else out


def optimal_power(
    gain,
    queue,
    *,
    V: float,
    lam: float,
    model_bits: float,
    bandwidth_hz: float,
    noise_power: float,
    p_max,
    rule: str = "exact",
) -> np.ndarray:
    """Per-device transmit power minimising V*lam*l/(B log2(1 + gP/N0)) + Z P on [0, Pmax].

    Parameters
    ----------
    gain : array (N,) of channel gains |h_n|^2 > 0.
    queue : array (N,) of virtual queues Z_n >= 0 (scalar broadcasts).
    V, lam : drift-plus-penalty weight and airtime weight (>= 0).
    model_bits, bandwidth_hz, noise_power : l, B and N0 (> 0).
    p_max : maximum power, scalar or per-device array (>= 0).
    rule : "exact" uses A = V lam l g ln2 / (N0 B Z) (the correct stationary point);
        "paper" uses the printed A = V lam l g (ln2)^2 / (N0 B Z) (the erratum in
        docs/papers/lyapunov.md, "Power").

    Returns
    -------
    ndarray (N,) of powers in [0, p_max]. Z = 0 gives p_max (cost decreasing in P);
    c = V lam l / B = 0 with Z > 0 gives 0 (the cost is Z P alone).
    """
    if rule not in POWER_RULES:
        raise ValueError(f"unknown power rule {rule!r}; allowed values: {', '.join(POWER_RULES)}")
    g = np.asarray(gain, dtype=float)
    z = np.broadcast_to(np.asarray(queue, dtype=float), g.shape)
    pmax = np.broadcast_to(np.asarray(p_max, dtype=float), g.shape)
    if g.ndim != 1:
        raise ValueError(f"gain must be a 1-D array, got shape {g.shape}")
    check_gains(g)
    if not np.all(np.isfinite(z)) or np.any(z < 0):
        raise ValueError("queue must be finite and >= 0")
    if not np.all(np.isfinite(pmax)) or np.any(pmax < 0):
        raise ValueError("p_max must be finite and >= 0")
    return powers(g, z, pmax, V=V, lam=lam, model_bits=model_bits, bandwidth_hz=bandwidth_hz,
                  noise_power=noise_power, rule=rule)


def check_gains(g: np.ndarray) -> None:
    """Raise ValueError unless every gain is finite and > 0."""
    if not ((g > 0) & (g < np.inf)).all():  # NaN fails both
        raise ValueError("gain must be finite and > 0 (apply the gain floor first)")


def powers(g: np.ndarray, z: np.ndarray, pmax: np.ndarray, *, V: float, lam: float,
           model_bits: float, bandwidth_hz: float, noise_power: float, rule: str) -> np.ndarray:
    """:func:`optimal_power` for arrays already checked (gains by :func:`check_gains`, queues and
    p_max finite and >= 0, all of one shape): the scheduler's per-round path. Scalars are checked."""
    for name, val in (("V", V), ("lam", lam)):
        if not (math.isfinite(val) and val >= 0):
            raise ValueError(f"{name} must be finite and >= 0, got {val!r}")
    for name, val in (("model_bits", model_bits), ("bandwidth_hz", bandwidth_hz),
                      ("noise_power", noise_power)):
        if not (math.isfinite(val) and val > 0):
            raise ValueError(f"{name} must be finite and > 0, got {val!r}")

    c = float(V) * float(lam) * float(model_bits) / float(bandwidth_hz)
    queued = z > 0
    if c == 0.0:
        # No airtime penalty: the cost is Z P, minimised by P = 0 wherever Z > 0.
        return np.where(queued, 0.0, pmax)
    if not queued.any():
        return pmax.copy()  # Z = 0: the cost decreases in P, so transmit at full power
    every = queued.all()  # the usual round once the queues have filled: no masking
    sel = slice(None) if every else queued
    # log A, assembled term by term so that no intermediate overflows.
    log_const = (math.log(V) + math.log(lam) + math.log(model_bits) + math.log(_LN2)
                 - math.log(noise_power) - math.log(bandwidth_hz))
    if rule == "paper":
        log_const += math.log(_LN2)
    log_g = np.log(g[sel])
    log_p = (math.log(noise_power) - log_g) + _log_xm1(log_const + log_g - np.log(z[sel]))
    # Clip in the log domain first (exp(> 709) would overflow), then to [0, Pmax] exactly.
    p = np.minimum(np.exp(np.minimum(log_p, 700.0)), pmax[sel])
    if every:
        return p
    power = pmax.copy()  # full power where Z = 0
    power[queued] = p
    return power
