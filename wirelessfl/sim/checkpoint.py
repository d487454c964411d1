"""Checkpoints of a run: everything needed to continue it and get the records of an uninterrupted run.

A checkpoint holds the engine's loop state (round, simulated clock, evaluation grid, every random
stream, the channel's memory), the state of every part (the scheduler's queues, the algorithm's
server state, ...: their ``state_dict``), the global model and the records so far. It is written
atomically (temporary file, then rename) and read with torch's weights-only loader, so loading one
executes no code. Parts may put numpy arrays in their state: they are stored as tensors and come
back as numpy arrays.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..files import unreadable_file, write_atomic

CHECKPOINT_NAME = "checkpoint.pt"


class ResumeError(ValueError):
    """A checkpoint cannot continue its run folder; the folder was left as it was."""


class CheckpointError(TypeError):
    """A part's state holds something a checkpoint cannot store (refused when it is written, so a run
    never writes checkpoints it could not resume from)."""


_NDARRAY = "__ndarray__"
_PLAIN = (bool, int, float, complex, str, type(None))
_HOLDS = "a checkpoint holds numbers, strings, None, numeric numpy arrays, tensors, lists, tuples and dicts"


def to_checkpoint(value: Any, where: str = "the state") -> Any:
    """``value`` with every numpy array (and numpy scalar) replaced by what the weights-only loader
    reads back: tensors tagged as arrays, plain Python numbers. CheckpointError, naming the part
    (the top-level key) and the key path, for anything the loader would refuse."""
    import torch

    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            raise CheckpointError(f"{where} is a numpy array of {value.dtype}: {_HOLDS}")
        return {_NDARRAY: torch.from_numpy(np.array(value))}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, (str, int)):
                raise CheckpointError(f"{where} has the key {k!r} ({type(k).__name__}): keys are strings or integers")
        return {k: to_checkpoint(v, f"{where}[{k!r}]" if where != "the state" else f"{k}'s state") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_checkpoint(v, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(value, (torch.Tensor, *_PLAIN)):
        return value
    raise CheckpointError(f"{where} is a {type(value).__module__}.{type(value).__qualname__}: {_HOLDS}")


def from_checkpoint(value: Any) -> Any:
    """Inverse of to_checkpoint: tagged tensors become numpy arrays again."""
    if isinstance(value, dict):
        if set(value) == {_NDARRAY}:
            return value[_NDARRAY].numpy().copy()
        return {k: from_checkpoint(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(from_checkpoint(v) for v in value)
    return value


def save_checkpoint(path: Path, state: dict) -> None:
    """Write ``state`` to ``path`` so a reader sees the previous checkpoint or this one, never a torn file."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(to_checkpoint(state), buffer)
    write_atomic(path, buffer.getvalue())


def load_checkpoint(path: Path) -> dict:
    """Read a checkpoint without executing pickled code (torch weights-only mode); ResumeError, in one
    line, for a link, a truncated, damaged or refused file."""
    import pickle
    import warnings

    import torch

    path = Path(path)
    if path.is_symlink():
        raise ResumeError(f"{path}: is a symbolic link; a checkpoint is read only from the run folder itself")
    problem = unreadable_file(path)
    if problem is not None:
        raise ResumeError(f"{path}: {problem}; it cannot be a checkpoint")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notes on unusual files: the error below says it
            state = torch.load(path, weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError, AttributeError, KeyError,
            TypeError, IndexError) as exc:  # what torch raises for damaged and refused files
        text = str(exc).strip()
        if "Weights only load failed" in text:  # never follow torch's advice to load it unsafely
            reason = "it holds code or objects that no checkpoint holds: refused, nothing of it ran"
        else:
            reason = (text.splitlines() or [type(exc).__name__])[0][:200]
        raise ResumeError(f"{path}: cannot be read as a checkpoint ({reason})") from None
    if not isinstance(state, dict):
        raise ResumeError(f"{path}: is not a checkpoint of a run")
    return from_checkpoint(state)
