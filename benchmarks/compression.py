"""The cost of encoding and decoding one device's update, per compressor, against sending it as
32-bit floats (``none``), measured in one process.

    python benchmarks/compression.py [--entries 199210] [--repeats 20]

199,210 entries is the MLP on Fashion-MNIST (``learning.model = "mlp"``).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from wirelessfl.learning.compression import COMPRESSORS


def per_vector_s(compressor, vector: np.ndarray, repeats: int) -> float:
    rng = np.random.default_rng(0)
    compressor.decode(compressor.encode(vector, rng), vector.size)  # warm up
    best = np.inf
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            compressor.decode(compressor.encode(vector, rng), vector.size)
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=199_210)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    vector = np.random.default_rng(1).normal(size=args.entries)
    times = {name: per_vector_s(COMPRESSORS.load(name)(), vector, args.repeats) for name in COMPRESSORS.builtins}
    print(f"encode + decode of one {args.entries:,}-entry update (best of 3 x {args.repeats}):")
    for name, seconds in times.items():
        bits = COMPRESSORS.load(name)().bits(args.entries)
        print(f"   {name:8s} {seconds * 1e3:6.2f} ms  {seconds / times['none']:5.1f}x none  "
              f"{bits / (32 * args.entries):7.4f} of the 32-bit size")


if __name__ == "__main__":
    main()
