"""Checkpoints of a run: everything needed to continue it and get the records of an uninterrupted run.

A checkpoint holds the engine's loop state (round, simulated clock, evaluation grid, every random
stream), the scheduler's state (e.g. the virtual queues), the learner's state (the global model and
any optimiser or algorithm state) and the records so far. It is written atomically (temporary file,
then rename) and read with torch's weights-only loader, so loading one executes no code.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

CHECKPOINT_NAME = "checkpoint.pt"


def object_state(obj) -> dict:
    """The numeric attributes of a plain object (arrays as tensors), e.g. a scheduler's queues."""
    state = {}
    for key, value in vars(obj).items():
        if isinstance(value, np.ndarray):
            state[key] = torch.from_numpy(np.array(value))
        elif isinstance(value, (bool, int, float, str)) or value is None:
            state[key] = value
    return state


def load_object_state(obj, state: dict) -> None:
    """Inverse of object_state."""
    for key, value in state.items():
        setattr(obj, key, value.numpy().copy() if isinstance(value, torch.Tensor) else value)


def save_checkpoint(path: Path, state: dict) -> None:
    """Write ``state`` to ``path`` so a reader sees the previous checkpoint or this one, never a torn file."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> dict:
    """Read a checkpoint without executing pickled code (torch weights-only mode)."""
    return torch.load(path, weights_only=True)
