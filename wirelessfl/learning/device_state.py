"""Per-device algorithm state: one row of numbers per device (SCAFFOLD's control variates, a
device's momentum, ...), kept for a whole run and checkpointed by what changed.

``trainer.device_state(name, width)`` gives a :class:`DeviceState`, an (N, width) float32 array
that starts at zero. Rows are read and written by device index, an int or an index array/tensor:
``state[devices]`` returns a tensor on the trainer's device with the shape the local step hook's
vectors have (``(width,)`` for an int, ``(k, width)`` for k indices), and ``state[devices] = rows``
stores them.

Where it lives: in memory, or, when the run has a folder and the array is larger than
``MEMMAP_BYTES``, memory-mapped in a scratch file of ``<run>/device_state`` that has no name (made
and unlinked at once: nothing can be planted where it is written, and its space goes back when the
process ends, even killed; a resume rebuilds it from the journal), so that N x d states larger than
memory still run.

How it is checkpointed: a checkpoint does not copy the array. Each checkpoint appends the rows
written since the previous one to ``<run>/device_state/<name>.g<k>.journal`` (a segment: row
count, the rows' indices, their values) and the checkpoint holds only the journal's name, length
and SHA-256 digest (kept as the journal grows: a checkpoint hashes only what it appends). A resume
replays the journal up to that length, so it sees the rows as they were at the checkpoint, whatever
was appended after it, once the digest of those bytes matches: a journal edited, cut, replaced by
another or by a link, a FIFO or a device is refused in one line naming it. When the journal outgrows twice the array, the next
checkpoint starts a new generation with one segment of every row ever written; the generation the
last checkpoint named is kept until the next checkpoint, older ones are deleted.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import torch

from ..files import (DamagedFile, UnsafeOutput, make_folder, open_regular, open_rewrite, open_scratch_array,
                     refuse_links)

__all__ = ["DeviceState", "DeviceStates", "MEMMAP_BYTES"]

MEMMAP_BYTES = 256 * 2 ** 20
"""Arrays above this size are memory-mapped in the run folder (when there is one)."""

_FOLDER = "device_state"
_HEADER = np.dtype("<i8")  # a segment starts with its row count


class DeviceState:
    """An (N, width) float32 array of per-device state; see the module docstring."""

    def __init__(self, name: str, num_devices: int, width: int, device: torch.device, folder: Path | None):
        self.name, self.num_devices, self.width, self.device = name, int(num_devices), int(width), device
        self.folder = folder
        self.generation, self.journal_bytes = 0, 0
        self._digest = hashlib.sha256()  # of the journal's first journal_bytes bytes
        nbytes = self.num_devices * self.width * 4
        if folder is not None and nbytes > MEMMAP_BYTES:
            make_folder(folder)
            self.array = open_scratch_array(folder, name, np.float32, (self.num_devices, self.width))
        else:
            self.array = np.zeros((self.num_devices, self.width), dtype=np.float32)
        self._rows = torch.from_numpy(self.array)  # shares the array's memory (or the mapped file's)
        self._dirty = np.zeros(self.num_devices, dtype=bool)   # written since the last checkpoint
        self._touched = np.zeros(self.num_devices, dtype=bool)  # ever written (what a new generation holds)

    @property
    def memory_mapped(self) -> bool:
        """True when the rows live in a file of the run folder rather than in memory."""
        return isinstance(self.array, np.memmap)

    def _index(self, devices) -> np.ndarray | int:
        if isinstance(devices, torch.Tensor):
            devices = devices.detach().cpu().numpy() if devices.ndim else int(devices)
        if isinstance(devices, (int, np.integer)):
            if not 0 <= int(devices) < self.num_devices:
                raise IndexError(f"device {devices} out of range [0, {self.num_devices})")
            return int(devices)
        index = np.asarray(devices, dtype=np.int64).reshape(-1)
        if index.size and (index.min() < 0 or index.max() >= self.num_devices):
            raise IndexError(f"devices must lie in [0, {self.num_devices}), got {index}")
        return index

    def __getitem__(self, devices) -> torch.Tensor:
        """The rows of ``devices`` (an int: (width,); indices: (k, width)), a copy on the trainer's device."""
        index = self._index(devices)
        rows = self._rows[index] if isinstance(index, int) else self._rows[torch.from_numpy(index)]
        return rows.to(self.device, copy=True)

    def __setitem__(self, devices, values) -> None:
        """Store ``values`` as the rows of ``devices`` (marked for the next checkpoint)."""
        index = self._index(devices)
        values = torch.as_tensor(values, dtype=torch.float32).detach().cpu()
        if isinstance(index, int):
            self._rows[index] = values
        else:
            self._rows[torch.from_numpy(index)] = values.reshape(index.size, self.width)
        self._dirty[index] = True
        self._touched[index] = True

    def add(self, devices, values) -> None:
        """Add ``values`` to the rows of ``devices`` (a device listed twice gets both)."""
        index = self._index(devices)
        values = torch.as_tensor(values, dtype=torch.float32).detach().cpu()
        if isinstance(index, int):
            self._rows[index] += values
        else:
            self._rows.index_add_(0, torch.from_numpy(index), values.reshape(index.size, self.width))
        self._dirty[index] = True
        self._touched[index] = True

    # --- checkpoints ---------------------------------------------------------------------------

    def _journal(self, generation: int) -> Path:
        return self.folder / f"{self.name}.g{generation}.journal"

    def checkpoint(self) -> dict:
        """Append the rows written since the last checkpoint to the journal (fsynced) and return the
        reference a checkpoint stores; without a run folder, the whole array (a run without a folder
        writes no checkpoint file, so this serves the Python API's state_dict only)."""
        if self.folder is None:
            return {"width": self.width, "array": self.array.copy()}
        make_folder(self.folder)
        named = self._journal(self.generation).name  # what the last checkpoint named: kept until the next
        if self.journal_bytes > 2 * self.array.nbytes:  # a new generation: every row once
            self.generation, self.journal_bytes = self.generation + 1, 0
            self._digest = hashlib.sha256()
            rows = np.flatnonzero(self._touched)
        else:
            rows = np.flatnonzero(self._dirty)
        path = self._journal(self.generation)
        for old in self.folder.glob(f"{self.name}.g*.journal"):
            if old.name not in (named, path.name):
                old.unlink()  # a link there goes, not what it points to
        with open_rewrite(path) as f:  # never through a link, never a FIFO or a device
            f.truncate(self.journal_bytes)  # bytes past the last checkpoint are from an attempt that died
            f.seek(self.journal_bytes)
            if rows.size:
                for part in (np.asarray([rows.size], dtype=_HEADER).tobytes(), rows.astype(_HEADER).tobytes(),
                             np.ascontiguousarray(self.array[rows]).tobytes()):
                    f.write(part)
                    self._digest.update(part)
            f.flush()
            os.fsync(f.fileno())
            self.journal_bytes = f.tell()
        self._dirty[:] = False
        return {"width": self.width, "journal": path.name, "bytes": self.journal_bytes,
                "generation": self.generation, "sha256": self._digest.hexdigest()}

    def restore(self, ref: dict) -> None:
        """Rebuild the rows a checkpoint named (``checkpoint``'s reference). Reads only: the journal's
        bytes past the checkpoint are dropped at the next checkpoint, not now."""
        if int(ref["width"]) != self.width:
            raise ValueError(f"device state {self.name!r} has width {ref['width']} in the checkpoint, "
                             f"{self.width} in this run")
        self._rows.zero_()
        self._touched[:] = False
        if "array" in ref:
            self._rows.copy_(torch.from_numpy(np.asarray(ref["array"], dtype=np.float32)))
            self._touched[:] = True
        else:
            if self.folder is None or Path(ref["journal"]).name != ref["journal"]:
                raise ValueError(f"device state {self.name!r}: the checkpoint names a journal this run cannot read")
            if not isinstance(ref.get("sha256"), str):
                raise ValueError(f"device state {self.name!r}: the checkpoint has no digest of its journal "
                                 "(written by an earlier version)")
            self._digest = self._replay(self.folder / ref["journal"], int(ref["bytes"]), ref["sha256"])
            self.generation, self.journal_bytes = int(ref["generation"]), int(ref["bytes"])
        self._dirty[:] = False

    def _replay(self, path: Path, length: int, sha256: str):
        """Replay the journal's first ``length`` bytes once their digest is ``sha256``; returns the
        digest (it goes on with the journal). DamagedFile, in one line naming the journal, for a
        journal that is not those bytes; nothing on disk is changed."""
        try:
            with open_regular(path) as f:  # not a link, a FIFO or a device
                data = f.read(length)
        except UnsafeOutput as exc:
            raise DamagedFile(f"{path}: {exc.problem}; a journal is read from the run folder itself") from None
        except OSError as exc:
            raise DamagedFile(f"{path}: cannot be read ({exc.strerror or exc})") from None
        if len(data) != length:
            raise DamagedFile(f"{path}: damaged: it holds {len(data)} bytes, the checkpoint expects {length}")
        digest = hashlib.sha256(data)
        if digest.hexdigest() != sha256:
            raise DamagedFile(f"{path}: damaged: its first {length} bytes are not the ones whose digest the "
                              "checkpoint holds")
        at, row_bytes = 0, self.width * 4
        while at < length:
            count = int(np.frombuffer(data, dtype=_HEADER, count=1, offset=at)[0]) if at + 8 <= length else -1
            end = at + 8 + count * (8 + row_bytes)
            if count < 0 or end > length:
                raise DamagedFile(f"{path}: damaged: a segment at byte {at} cannot be read")
            rows = np.frombuffer(data, dtype=_HEADER, count=count, offset=at + 8)
            values = np.frombuffer(data, dtype=np.float32, count=count * self.width, offset=at + 8 + 8 * count)
            if rows.size and (rows.min() < 0 or rows.max() >= self.num_devices):
                raise DamagedFile(f"{path}: damaged: a segment at byte {at} cannot be read")
            self.array[rows] = values.reshape(-1, self.width)
            self._touched[rows] = True
            at = end
        return digest


class DeviceStates:
    """The trainer's named per-device states (see the module docstring); ``folder``: the run's
    ``device_state`` folder, set by the runner when the run has a folder."""

    def __init__(self, num_devices: int, device: torch.device):
        self.num_devices, self.device = int(num_devices), device
        self.folder: Path | None = None
        self.states: dict[str, DeviceState] = {}

    def use_run_folder(self, run_dir: Path) -> None:
        """Keep journals (and large arrays) under ``run_dir/device_state`` from now on."""
        self.folder = Path(run_dir) / _FOLDER

    def get(self, name: str, width: int) -> DeviceState:
        """The state ``name``, created at zero on first use."""
        if not name or not all(c.isalnum() or c in "_-" for c in name):
            raise ValueError(f"device state name {name!r}: use letters, digits, '_' and '-'")
        state = self.states.get(name)
        if state is None:
            state = self.states[name] = DeviceState(name, self.num_devices, width, self.device, self.folder)
        elif state.width != int(width):
            raise ValueError(f"device state {name!r} exists with width {state.width}, asked for {width}")
        return state

    def checkpoint(self) -> dict:
        """Every state's checkpoint reference, by name."""
        return {name: state.checkpoint() for name, state in self.states.items()}

    def check_files(self) -> None:
        """UnsafeOutput, in one line naming the path, when the run folder's ``device_state`` is a link
        or not a folder, or holds a journal or an array that is a link or not a regular file: what
        this run would write through or read from (checked before a run or a resume begins)."""
        if self.folder is None or not os.path.lexists(self.folder):
            return
        if self.folder.is_symlink() or not self.folder.is_dir():
            make_folder(self.folder)  # says which
        refuse_links(self.folder, sorted(p.name for p in self.folder.iterdir()
                                         if p.name.endswith((".journal", ".live"))))

    def remove_files(self) -> None:
        """Delete the journals and memory-mapped arrays (a run that completed has nothing to resume)."""
        if self.folder is None or self.folder.is_symlink() or not self.folder.is_dir():
            return  # a link there: what it points to is not ours
        for name in self.states:
            for path in [*self.folder.glob(f"{name}.g*.journal"), self.folder / f"{name}.live"]:
                path.unlink(missing_ok=True)
        try:
            self.folder.rmdir()
        except OSError:  # something else in it: not ours to remove
            pass

    def restore(self, refs: dict) -> None:
        """Restore every state a checkpoint named (creating those this run has not made yet)."""
        for name, ref in refs.items():
            self.get(name, int(ref["width"])).restore(ref)
