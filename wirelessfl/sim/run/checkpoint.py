"""Checkpoints of a run: everything needed to continue it and get the records of an uninterrupted run.

A checkpoint holds the engine's loop state (round, simulated clock, evaluation grid, every random
stream, the channel's memory), the state of every part (the scheduler's queues, the algorithm's
server state, ...: their ``state_dict``), the global model and the records so far. It is written
atomically (temporary file, then rename) and read with torch's weights-only loader, so loading one
executes no code. Parts may put numpy arrays in their state: they are stored as tensors and come
back as numpy arrays.

A checkpoint carries the SHA-256 of what it holds (``CHECKSUM``: every key, number, string and
tensor's bytes, in order), so a byte changed in the file, or a state edited and saved again, is
refused in one line when it is read, and nothing is resumed from it. The records a checkpoint
continues carry digests of their own (see wirelessfl.files.FileDigest).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...files import UnsafeOutput, open_regular, write_atomic

CHECKPOINT_NAME = "checkpoint.pt"
CHECKSUM = "sha256"
"""The checkpoint's own key: the digest of everything else it holds (see ``state_digest``)."""


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
    if isinstance(value, str) and type(value) is not str:
        return str.__str__(value)  # a str enum's value (an update's Outcome): the loader reads plain strings
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


def state_digest(state: dict) -> str:
    """The SHA-256 of a stored state (what to_checkpoint gives, and what torch's loader gives back):
    its structure, keys and values in order, tensors by dtype, shape and bytes."""
    import hashlib
    import struct

    import torch

    h = hashlib.sha256()

    def feed(value) -> None:
        if isinstance(value, dict):
            h.update(b"d%d;" % len(value))
            for key, item in value.items():
                feed(key)
                feed(item)
        elif isinstance(value, (list, tuple)):
            h.update(b"%c%d;" % (b"l" if isinstance(value, list) else b"t", len(value)))
            for item in value:
                feed(item)
        elif isinstance(value, torch.Tensor):
            flat = value.detach().cpu().contiguous().reshape(-1)
            h.update(f"T{flat.dtype}{tuple(value.shape)};".encode())
            h.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
        elif isinstance(value, bool) or value is None:
            h.update(b"b%r;" % value)
        elif isinstance(value, int):
            h.update(b"i%d;" % value)
        elif isinstance(value, float):
            h.update(b"f" + struct.pack("<d", value))
        elif isinstance(value, complex):
            h.update(b"c" + struct.pack("<dd", value.real, value.imag))
        elif isinstance(value, str):
            data = value.encode("utf-8", "surrogatepass")
            h.update(b"s%d;" % len(data) + data)
        else:
            raise CheckpointError(f"a {type(value).__name__} in the state: {_HOLDS}")

    feed(state)
    return h.hexdigest()


def save_checkpoint(path: Path, state: dict) -> None:
    """Write ``state`` to ``path`` so a reader sees the previous checkpoint or this one, never a torn
    file; with the digest of what it holds (``CHECKSUM``)."""
    import io

    import torch

    stored = to_checkpoint(state)
    stored[CHECKSUM] = state_digest(stored)
    buffer = io.BytesIO()
    torch.save(stored, buffer)
    write_atomic(path, buffer.getvalue())


def load_checkpoint(path: Path) -> dict:
    """Read a checkpoint without executing pickled code (torch weights-only mode); ResumeError, in one
    line, for a link, a FIFO or a device, a truncated, damaged or refused file, and one whose
    contents do not match the digest it carries."""
    import pickle
    import warnings

    import torch

    path = Path(path)
    try:
        fh = open_regular(path)  # not a link (refused), a FIFO (would hang) or a device (never ends)
    except UnsafeOutput as exc:
        what = "a checkpoint is read only from the run folder itself" if "link" in exc.problem \
            else "it cannot be a checkpoint"
        raise ResumeError(f"{path}: {exc.problem}; {what}") from None
    except FileNotFoundError:
        raise ResumeError(f"{path}: no such file; it cannot be a checkpoint") from None
    except OSError as exc:
        raise ResumeError(f"{path}: cannot be read ({exc.strerror or exc}); it cannot be a checkpoint") from None
    try:
        with fh, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's notes on unusual files: the error below says it
            state = torch.load(fh, weights_only=True)
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
    checksum = state.pop(CHECKSUM, None)
    if not isinstance(checksum, str):
        raise ResumeError(f"{path}: carries no checksum (written by an earlier version, or edited); start the "
                          "run again")
    try:
        same = state_digest(state) == checksum
    except CheckpointError:
        same = False
    if not same:
        raise ResumeError(f"{path}: damaged: what it holds does not match its checksum; the folder is left as it was")
    return from_checkpoint(state)
