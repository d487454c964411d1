"""Named random streams derived from one root seed.

Every consumer of randomness (channel, selection, partition, minibatches, model init, ...) asks
for its own stream by name, so adding a new consumer never shifts the draws of another and a run
gives the same records serially or in a worker pool.
"""
from __future__ import annotations

import zlib

import numpy as np


def _seed_sequence(root_seed: int, name: str) -> np.random.SeedSequence:
    # crc32 is stable across processes and Python versions (unlike hash()).
    return np.random.SeedSequence(entropy=int(root_seed), spawn_key=(zlib.crc32(name.encode()),))


def stream(root_seed: int, name: str, *keys: int) -> np.random.Generator:
    """Return the numpy Generator for the stream ``name`` under ``root_seed``; ``keys`` (non-negative
    integers) name independent children of it, e.g. one per device and segment of its path."""
    seq = _seed_sequence(root_seed, name)
    if keys:
        seq = np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, *(int(k) for k in keys)))
    return np.random.Generator(np.random.PCG64(seq))


def torch_generator(root_seed: int, name: str):
    """Return a CPU torch.Generator for the stream ``name`` under ``root_seed``."""
    import torch

    seed = int(_seed_sequence(root_seed, name).generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen
