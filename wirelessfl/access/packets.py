"""A sync round's uploads in packets that may fail, at the round's gain, in closed form: each on a
channel of its own (``AccessScheme.solo_uploads``), or on a shared band at the device's rate on the
round's equal split of it (``AccessScheme.send_packets`` picks; the sync engine calls that)."""
from __future__ import annotations

import numpy as np

from .link import Link, share_snr

__all__ = ["send_shared", "send_solo"]


def send_solo(access, link: Link, bits, gains: np.ndarray, power: np.ndarray, rng: np.random.Generator):
    """Each upload on ``link``, a channel of its own (the scheme's upload link), each transmission
    holding it for the scheme's ``on_air_s``: (time on the air, transmissions, delivered, (MCS,
    transport blocks) rows)."""
    sent, harq = [], []
    for b, g, pw in zip(np.broadcast_to(bits, gains.shape).tolist(), gains.tolist(), power.tolist()):
        sent.append(link.send(b, g, pw, rng, access.on_air_s))
        harq.append(link.upload_harq)
    return _columns(sent, harq)


def send_shared(access, fading: np.ndarray | None, bits, gains: np.ndarray, power: np.ndarray,
                rng: np.random.Generator):
    """The uploads of devices sharing the band at once: each at its rate on the round's split of it
    (``fading``: what they drew for the scheme's rates, or None), with its errors drawn at that
    share's SNR (as the closed form splits the band for the whole round; with an MCS rate, at the
    scheme's ``share_snrs`` on a share of B / k)."""
    mcs_rate = access.link.mcs_rate
    link, k = access.link, max(gains.size, 1)
    capacity = access.rates_bps(gains, power, fading)
    snr = access.share_snrs(gains, power, fading) if mcs_rate else share_snr(capacity, link.bandwidth_hz / k)
    share = link.bandwidth_hz / k if mcs_rate else None
    sent, harq = [], []
    for b, c, q in zip(np.broadcast_to(bits, gains.shape).tolist(), capacity.tolist(), snr.tolist()):
        sent.append(link.send_at(b, c, q, rng, bandwidth_hz=share))
        harq.append(link.upload_harq)
    return _columns(sent, harq)


def _columns(sent: list, harq: list):
    """The uploads' (seconds, transmissions, delivered) tuples and HARQ pairs as typed columns."""
    airtime, attempts, delivered = (np.array(column) for column in zip(*sent)) if sent else \
        (np.empty(0), np.empty(0, dtype=np.int64), np.empty(0, dtype=bool))
    return (airtime.astype(float), attempts.astype(np.int64), delivered.astype(bool),
            np.array(harq, dtype=np.int64).reshape(-1, 2))
