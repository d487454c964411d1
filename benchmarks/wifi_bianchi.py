"""The 802.11 DCF of ``link.access = "wifi"`` against Bianchi's saturation model (IEEE JSAC 2000).

n saturated stations (each always holding a frame: a DCF station with infinite bits) contend on
802.11a at 54 Mb/s with 1500-byte payloads (12000 bits a frame, MAC header and FCS 28 bytes:
DATA 248 us, ACK at 24 Mb/s 28 us; slot 9 us, SIFS 16 us, DIFS 34 us, EIFS 94 us, CWmin 15,
CWmax 1023, so W = 16 and m = 6), basic access and RTS/CTS, no retry limit (Bianchi's chain; with
--retry-limit R, the chain cut at R transmissions, Wu et al. 2002). The run is the DCF core of the
simulator itself (wirelessfl.access.wifi_dcf.Dcf: one step per contention round), timing only.

Measured: throughput S = payload bits acknowledged / time, and the collision probability p =
transmissions that collided / transmissions, after a warm-up; their standard errors from 20 batch
means. Model: wirelessfl.access.wifi_bianchi.bianchi with the same Ts and Tc.

    python benchmarks/wifi_bianchi.py                      # the table of docs/radio.md (Wi-Fi) and figures/wifi_bianchi.png
    python benchmarks/wifi_bianchi.py --rounds 20000       # quicker, noisier
    python benchmarks/wifi_bianchi.py --retry-limit 7      # the finite-retry chain
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wirelessfl.access.wifi_bianchi import BianchiPoint, bianchi, busy_times_s
from wirelessfl.access.wifi_dcf import Dcf
from wirelessfl.access.wifi_phy import WifiPhy, eifs_s, exchange, mcs_for_rate, phy

STATIONS = (1, 2, 5, 10, 20, 50)
PAYLOAD_BITS = 12000
BATCHES = 20


@dataclass(frozen=True)
class Measured:
    """A saturated run: throughput (bit/s) and collision probability, each with its standard error."""

    n: int
    throughput_bps: float
    throughput_se: float
    p: float
    p_se: float


def setup(standard: str = "80211a", rate_bps: float = 54e6, rts_cts: bool = False):
    """(PHY, MCS, the frame of 1500 bytes, Ts, Tc) of the comparison."""
    p = phy(standard)
    mcs = mcs_for_rate(p, rate_bps)
    frame = exchange(p, mcs, PAYLOAD_BITS, PAYLOAD_BITS, rts_cts)
    ts, tc = busy_times_s(p, frame, p.difs_s)
    return p, mcs, frame, ts, tc


def measure_saturation(p: WifiPhy, mcs_index: int, frame, n: int, rounds: int, seed: int = 0,
                       retry_limit: int | None = None, warmup: int = 2000) -> Measured:
    """n stations that always hold a frame, ``rounds`` contention rounds of the simulator's DCF."""
    dcf = Dcf(p.slot_s, p.sifs_s, p.difs_s, eifs_s(p, p.difs_s), p.cw_min, p.max_backoff_stage, retry_limit,
              lambda station: frame, np.random.default_rng(seed))
    for k in range(n):
        dcf.join(k, 0.0, math.inf, mcs_index)
    for _ in range(warmup):
        dcf.step()
    per = max(rounds // BATCHES, 1)
    rates, probs, bits_all, sent_all, collided_all, t_all = [], [], 0.0, 0, 0, 0.0
    for _ in range(BATCHES):
        t0, bits, sent, collided = dcf.epoch_s, 0.0, 0, 0
        for _ in range(per):
            r = dcf.step()
            sent += len(r.stations)
            if r.success:
                bits += r.frames[0].payload_bits
            else:
                collided += len(r.stations)
        took = dcf.epoch_s - t0
        rates.append(bits / took)
        probs.append(collided / sent)
        bits_all, t_all = bits_all + bits, t_all + took
        sent_all, collided_all = sent_all + sent, collided_all + collided
    se = lambda xs: float(np.std(xs, ddof=1) / math.sqrt(len(xs)))  # noqa: E731
    return Measured(n, bits_all / t_all, se(rates), collided_all / sent_all, se(probs))


def model(p: WifiPhy, n: int, ts: float, tc: float, retry_limit: int | None = None) -> BianchiPoint:
    """Bianchi's point for n stations with the same durations."""
    return bianchi(n, p.cw_min, p.max_backoff_stage, slot_s=p.slot_s, success_s=ts, collision_s=tc,
                   payload_bits=PAYLOAD_BITS, retry_limit=retry_limit)


def slot_by_slot_p(n: int, w: int, m: int, slots: int, seed: int = 0) -> float:
    """Bianchi's chain itself simulated generic slot by generic slot, without the decoupling
    assumption (a reference for small n, where the model's p is known to be off): the collision
    probability of a transmission."""
    rng = np.random.default_rng(seed)
    stage = [0] * n
    counter = [int(rng.integers(0, w)) for _ in range(n)]
    sent = collided = 0
    for _ in range(slots):
        tx = [i for i in range(n) if counter[i] == 0]
        for i in range(n):
            if counter[i]:
                counter[i] -= 1
        for i in tx:
            stage[i] = stage[i] + 1 if len(tx) > 1 else 0
            counter[i] = int(rng.integers(0, w << min(stage[i], m)))
        sent += len(tx)
        collided += len(tx) if len(tx) > 1 else 0
    return collided / sent


def table(rounds: int, retry_limit: int | None, seed: int) -> list[dict]:
    rows = []
    for rts in (False, True):
        p, mcs, frame, ts, tc = setup(rts_cts=rts)
        for n in STATIONS:
            got = measure_saturation(p, mcs.index, frame, n, rounds, seed + n + 1000 * rts, retry_limit)
            exp = model(p, n, ts, tc, retry_limit)
            rows.append({"mode": "RTS/CTS" if rts else "basic", "n": n, "S_sim": got.throughput_bps,
                         "S_se": got.throughput_se, "S_model": exp.throughput_bps, "p_sim": got.p, "p_se": got.p_se,
                         "p_model": exp.p})
    return rows


def relative(a: float, b: float) -> float:
    return 0.0 if a == b == 0 else 100.0 * (a / b - 1.0)


def print_table(rows: list[dict]) -> None:
    print("| access | n | S simulated (Mb/s) | S Bianchi (Mb/s) | diff | p simulated | p Bianchi | diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['mode']} | {r['n']} | {r['S_sim'] / 1e6:.3f} ± {r['S_se'] / 1e6:.3f} | "
              f"{r['S_model'] / 1e6:.3f} | {relative(r['S_sim'], r['S_model']):+.2f} % | "
              f"{r['p_sim']:.4f} ± {r['p_se']:.4f} | {r['p_model']:.4f} | {relative(r['p_sim'], r['p_model']):+.2f} % |")


def figure(rows: list[dict], path: Path, retry_limit: int | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ns = np.arange(1, max(STATIONS) + 1)
    for rts, colour in ((False, "C0"), (True, "C1")):
        mode = "RTS/CTS" if rts else "basic"
        p, _, _, ts, tc = setup(rts_cts=rts)
        ax.plot(ns, [model(p, int(n), ts, tc, retry_limit).throughput_bps / 1e6 for n in ns], color=colour,
                label=f"Bianchi, {mode}")
        pts = [r for r in rows if r["mode"] == mode]
        ax.errorbar([r["n"] for r in pts], [r["S_sim"] / 1e6 for r in pts], yerr=[2 * r["S_se"] / 1e6 for r in pts],
                    fmt="o", color=colour, mfc="none", label=f"simulated DCF, {mode}")
    ax.set_xlabel("stations n (saturated)")
    ax.set_ylabel("saturation throughput (Mb/s)")
    ax.set_title("802.11a, 54 Mb/s, 1500-byte payloads")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=400_000, help="contention rounds a point (after 2000 of warm-up)")
    ap.add_argument("--retry-limit", type=int, default=None, help="transmissions of a frame before it is dropped")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--figure", type=Path, default=Path(__file__).resolve().parents[1] / "figures" / "wifi_bianchi.png")
    args = ap.parse_args()
    started = time.perf_counter()
    rows = table(args.rounds, args.retry_limit, args.seed)
    print_table(rows)
    p = phy("80211a")
    chain = slot_by_slot_p(2, p.cw_min + 1, p.max_backoff_stage, 2_000_000, args.seed)
    print(f"\nn = 2: Bianchi's chain simulated slot by slot (no decoupling assumption): p = {chain:.4f}")
    figure(rows, args.figure, args.retry_limit)
    print(f"figure: {args.figure}; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
