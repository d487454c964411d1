"""Bianchi's model of the 802.11 DCF in saturation (G. Bianchi, "Performance analysis of the IEEE
802.11 distributed coordination function", IEEE JSAC 18(3), 2000), the yardstick of the DCF that
``link.access = "wifi"`` simulates (wirelessfl.access.wifi_dcf).

n stations always have a frame to send. Each transmits in a (generic) slot with probability tau,
and collides with probability p = 1 - (1 - tau)^(n - 1) (the decoupling assumption: p is the same
at every attempt). The backoff chain gives tau(p); with W = CWmin + 1 and m doublings to CWmax + 1,
and no retry limit (Bianchi's eq. 7):

    tau = 2 (1 - 2p) / ((1 - 2p)(W + 1) + p W (1 - (2p)^m))

With a retry limit R (a frame is dropped after R transmissions; Wu et al., "Performance of reliable
transport protocol over IEEE 802.11 wireless LAN", INFOCOM 2002, give the same chain cut at stage
R - 1) the chain gives

    tau = sum_{i<R} p^i / sum_{i<R} p^i (W_i + 1) / 2,     W_i = 2^min(i, m) W

(:func:`transmit_probability` computes this sum for both; R = infinity gives eq. 7). The fixed
point in tau is found by bisection. Then (eq. 13)

    S = Ps Ptr E[P] / ((1 - Ptr) sigma + Ptr Ps Ts + Ptr (1 - Ps) Tc)
    Ptr = 1 - (1 - tau)^n,   Ps = n tau (1 - tau)^(n - 1) / Ptr

with sigma the slot, Ts the medium busy for a success and Tc for a collision. With the standard's
durations (wirelessfl.access.wifi_phy, propagation delay 0, i.e. inside the slot) and DIFS after
each exchange, as the simulator counts them:

    basic:    Ts = DATA + SIFS + ACK + DIFS,                          Tc = DATA + EIFS
    RTS/CTS:  Ts = RTS + SIFS + CTS + SIFS + DATA + SIFS + ACK + DIFS, Tc = RTS + EIFS

(Bianchi's Tc ends with DIFS; the standard has the stations that heard a collision wait EIFS =
SIFS + ACK at 6 Mb/s + DIFS, 10.3.2.3.7, which ns-3's Bianchi validation also offers.)
"""
from __future__ import annotations

from dataclasses import dataclass

from .wifi_phy import FrameExchange, WifiPhy, eifs_s

__all__ = ["BianchiPoint", "bianchi", "bianchi_tau", "busy_times_s", "solve_tau", "transmit_probability"]


def bianchi_tau(p: float, w: int, m: int) -> float:
    """Bianchi's eq. 7: a station's transmit probability per slot when each attempt collides with
    probability ``p`` (``w`` = CWmin + 1, ``m`` doublings, no retry limit)."""
    if abs(1.0 - 2.0 * p) < 1e-9:  # 0 / 0 at p = 1/2: the chain's sum is its limit there
        return transmit_probability(p, w, m)
    return 2.0 * (1.0 - 2.0 * p) / ((1.0 - 2.0 * p) * (w + 1) + p * w * (1.0 - (2.0 * p) ** m))


def transmit_probability(p: float, w: int, m: int, retry_limit: int | None = None) -> float:
    """tau(p) of the backoff chain: stage i (the i-th retransmission of a frame) draws its counter
    uniformly in [0, W_i - 1], W_i = 2^min(i, m) w, and is reached with probability p^i; with
    ``retry_limit`` R the chain has stages 0 .. R - 1 (the frame is dropped after R transmissions),
    without one it never ends (the stages from m on share W_m)."""
    window = [2 ** min(i, m) * w for i in range(m + 1)]
    if retry_limit is None:
        reach = [p ** i for i in range(m)] + [p ** m / (1.0 - p)]  # stage m and beyond, summed
    else:
        reach = [p ** i for i in range(retry_limit)]
        window = [2 ** min(i, m) * w for i in range(retry_limit)]
    attempts = sum(reach)
    slots = sum(r * (wi + 1) / 2.0 for r, wi in zip(reach, window))
    return attempts / slots


def solve_tau(n: int, w: int, m: int, retry_limit: int | None = None) -> tuple[float, float]:
    """The fixed point (tau, p) of tau = tau(p), p = 1 - (1 - tau)^(n - 1), by bisection."""
    if n <= 1:
        return transmit_probability(0.0, w, m, retry_limit), 0.0
    lo, hi = 0.0, 1.0
    for _ in range(200):  # tau(p(t)) - t falls from positive at 0 to negative at 1
        mid = 0.5 * (lo + hi)
        p = 1.0 - (1.0 - mid) ** (n - 1)
        if transmit_probability(min(p, 1.0 - 1e-15), w, m, retry_limit) > mid:
            lo = mid
        else:
            hi = mid
    tau = 0.5 * (lo + hi)
    return tau, 1.0 - (1.0 - tau) ** (n - 1)


def busy_times_s(phy: WifiPhy, frame: FrameExchange, ifs_s: float) -> tuple[float, float]:
    """(Ts, Tc): the medium busy for a successful exchange of ``frame`` and for a collision of
    frames like it, each with the interframe space that follows (``ifs_s`` after a success, EIFS
    after a collision)."""
    success = frame.until_ack_s(phy.sifs_s) + ifs_s
    collision = frame.attempt_s() + eifs_s(phy, ifs_s)
    return success, collision


@dataclass(frozen=True)
class BianchiPoint:
    """Bianchi's saturation numbers for n stations: tau, p, Ptr, Ps and the throughput (bit/s)."""

    n: int
    tau: float
    p: float
    p_tr: float
    p_s: float
    throughput_bps: float


def bianchi(n: int, cw_min: int, m: int, *, slot_s: float, success_s: float, collision_s: float,
            payload_bits: float, retry_limit: int | None = None) -> BianchiPoint:
    """Bianchi's saturation throughput of n stations: contention windows from ``cw_min`` + 1 doubling
    ``m`` times; slot ``slot_s``; Ts = ``success_s``, Tc = ``collision_s``; E[P] = ``payload_bits``;
    ``retry_limit`` None: Bianchi's chain (no limit), else the chain cut at that many transmissions."""
    tau, p = solve_tau(n, cw_min + 1, m, retry_limit)
    p_tr = 1.0 - (1.0 - tau) ** n
    p_s = n * tau * (1.0 - tau) ** (n - 1) / p_tr
    s = p_s * p_tr * payload_bits / ((1.0 - p_tr) * slot_s + p_tr * p_s * success_s + p_tr * (1.0 - p_s) * collision_s)
    return BianchiPoint(n, tau, p, p_tr, p_s, s)
