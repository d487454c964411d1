"""Per-round arrays of every device (gains, omega, q, P, Z, availability; positions when devices
move), streamed to decisions.h5.

One HDF5 dataset per key, rounds x devices float32, appended every few rounds while the run goes:
memory stays flat however many rounds a run has (N = 10,000 devices: 240 KB a round). HDF5 through
h5py was measured against zarr and Parquet (pyarrow) on 2,000 rounds x 10,000 devices: 0.5 s to write
against 5.8-7.3 s (zarr) and 11 s (Parquet, which also cannot be appended to after a crash). The file
is in single-writer/multiple-reader mode, flushed at every append, so a killed run leaves a readable
file; a resume cuts it back to the rounds of its checkpoint, once the rounds it keeps have the
digests the checkpoint holds (a running SHA-256 of each key's rows, taken as they are written).

``load_decisions(run_dir)`` reads the arrays back (also ``decisions.npz`` of runs written before).
"""
from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

try:
    import resource
except ImportError:  # pragma: no cover - not POSIX
    resource = None

import numpy as np

from ...files import UnsafeOutput, refuse_links, replacing_path, unreadable_file

__all__ = ["ARRAY_KEYS", "DECISIONS", "DeviceArrays", "load_decisions", "rounds_per_write"]

ARRAY_KEYS = ("gains", "omega", "q", "power", "queue", "available")
"""Per-round arrays of every device (available: 1 where it could be scheduled)."""
DECISIONS = "decisions.h5"


BUFFER_BYTES = 8 * 2 ** 20
"""Rounds are buffered up to about this much float32 data before they are written: each write costs
a few HDF5 calls per key, so small devices counts write hundreds of rounds at a time (N = 100: 1,024
rounds, 2.4 MB) and N = 10,000 a few dozen, and memory stays flat either way."""


def rounds_per_write(num_devices: int) -> int:
    """How many rounds DeviceArrays buffers for ``num_devices`` devices (16 to 1,024)."""
    return int(min(max(BUFFER_BYTES // (4 * len(ARRAY_KEYS) * max(num_devices, 1)), 16), 1024))


class DeviceArrays:
    """Appends one row per round of every key to ``path``, ``every`` rounds at a time (default:
    ``rounds_per_write``); the HDF5 chunks are ``every`` rounds long. ``extra``: more keys, each with
    the shape of a device's entry (``{"positions": (2,)}``: rounds x devices x 2)."""

    def __init__(self, path: Path, num_devices: int, every: int | None = None,
                 extra: dict[str, tuple[int, ...]] | None = None):
        self.path, self.num_devices = Path(path), int(num_devices)
        self.shapes = {key: () for key in ARRAY_KEYS} | dict(extra or {})
        self.every = int(every) if every is not None else rounds_per_write(self.num_devices)
        self.rows = 0  # rows in the file
        self._buffer: list[dict[str, np.ndarray]] = []
        self._file = None
        self._digests = {key: hashlib.sha256() for key in self.shapes}  # of each key's rows in the file
        self._verified = None  # the digests check() found, for resume()

    def start(self) -> None:
        """A new file with empty datasets."""
        self._file = self._create(self.path)
        self._file.swmr_mode = True  # readers (and a resume after a crash) see a consistent file
        self.rows = 0
        self._digests = {key: hashlib.sha256() for key in self.shapes}

    def _create(self, path: Path):
        import h5py

        if path.is_symlink():
            raise UnsafeOutput(f"{path}: is a symbolic link; a run writes its files itself")
        refuse_links(path.parent, [path.name])  # nor a FIFO or a device
        if path.exists() and path.stat().st_nlink > 1:  # "w" empties a file in place: a hard link elsewhere
            path.unlink()                                # keeps its bytes, this run gets a file of its own
        fh = h5py.File(path, "w", libver="latest")
        for key, entry in self.shapes.items():
            fh.create_dataset(key, shape=(0, self.num_devices, *entry), maxshape=(None, self.num_devices, *entry),
                              dtype="f4", chunks=(self.every, self.num_devices, *entry))
        return fh

    def digests(self) -> dict[str, str]:
        """The SHA-256 of each key's rows written so far (flush first): what a checkpoint holds."""
        return {key: h.hexdigest() for key, h in self._digests.items()}

    def check(self, rows: int, digests=None) -> str | None:
        """Why the file cannot continue after ``rows`` rounds (None: it can): it must hold them, with
        the ``digests`` a checkpoint holds (the rows are read once); touches nothing."""
        self._verified = None
        if rows == 0:
            return None
        if self.path.is_symlink():
            return f"{self.path.name} is a symbolic link"
        if not self.path.exists():
            return f"{self.path.name} is missing (the checkpoint has {rows} rounds of it)"
        try:
            refuse_links(self.path.parent, [self.path.name])
        except UnsafeOutput as exc:
            return f"{self.path.name} {exc.problem}"
        if not isinstance(digests, dict) or set(digests) != set(self.shapes):
            return f"the checkpoint has no digests of {self.path.name} (written by an earlier version)"
        try:
            import h5py

            with h5py.File(self.path, "r", libver="latest", swmr=True) as fh:
                short = [k for k in self.shapes if k not in fh or fh[k].shape[0] < rows
                         or fh[k].shape[1] != self.num_devices]
                if short:
                    return f"{self.path.name} holds fewer than the checkpoint's {rows} rounds of {short[0]}"
                found = {key: hashlib.sha256() for key in self.shapes}
                for key, h in found.items():
                    for start in range(0, rows, 1024):  # in blocks: memory stays flat
                        h.update(np.ascontiguousarray(fh[key][start:min(start + 1024, rows)], dtype=np.float32))
        except OSError as exc:
            return f"{self.path.name} cannot be read ({exc})"
        differ = [key for key, h in found.items() if h.hexdigest() != digests[key]]
        if differ:
            return f"{self.path.name} is not the file the checkpoint continues (its first {rows} rounds of {differ[0]} differ)"
        self._verified = (rows, found)
        return None

    def resume(self, rows: int) -> None:
        """Continue the file after ``rows`` rounds; rows written after the checkpoint are dropped.

        A killed writer leaves the file marked as open for writing (HDF5 lets only readers in), so
        the first ``rows`` rounds are copied into a new file that replaces it in one rename."""
        if rows == 0:
            self.start()
            return
        if self._verified is not None and self._verified[0] == rows:
            self._digests = self._verified[1]
        else:  # resumed without check(): hashed as copied below
            self._digests = None
        import h5py

        with replacing_path(self.path) as tmp:
            new = self._create(tmp)
            try:
                with h5py.File(self.path, "r", libver="latest", swmr=True) as old:
                    for key in self.shapes:
                        new[key].resize(rows, axis=0)
                        for start in range(0, rows, 1024):  # in blocks: memory stays flat
                            new[key][start:start + 1024] = old[key][start:min(start + 1024, rows)]
                    if self._digests is None:
                        self._digests = {key: hashlib.sha256() for key in self.shapes}
                        for key, h in self._digests.items():
                            for start in range(0, rows, 1024):
                                h.update(np.ascontiguousarray(new[key][start:min(start + 1024, rows)],
                                                              dtype=np.float32))
            finally:
                new.close()
        self._file = h5py.File(self.path, "r+", libver="latest")
        self._file.swmr_mode = True
        self.rows = rows

    def append(self, row: dict[str, np.ndarray]) -> None:
        """Buffer one round; write the buffer every ``every`` rounds (checkpoints write it too)."""
        self._buffer.append(row)
        if len(self._buffer) >= self.every:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rounds and flush the file."""
        if not self._buffer or self._file is None:
            return
        n = len(self._buffer)
        self._check_room(n)
        try:
            for key in self.shapes:
                dataset = self._file[key]
                dataset.resize(self.rows + n, axis=0)
                block = np.stack([row[key] for row in self._buffer]).astype(np.float32)
                dataset[self.rows:] = block
                self._digests[key].update(block)  # C-ordered float32: the bytes the file holds
            self._file.flush()
        except BaseException:
            # A failed write (a full disk) leaves HDF5's cache dirty: flushing it again can crash the
            # process. Close it at once and never write again; the rows flushed before stay readable.
            self._abandon()
            raise
        self.rows += n
        self._buffer = []

    def _check_room(self, rows: int) -> None:
        """OSError (no space left, or the file-size limit) before HDF5 is asked for a write that
        cannot succeed: libhdf5 can crash the whole process after a failed write (a full disk ended
        a sweep with a segmentation fault), while a refused one leaves the file readable up to its
        last flush."""
        chunk_floats = sum(self.every * self.num_devices * int(np.prod(entry)) for entry in self.shapes.values())
        need = 4 * chunk_floats * (rows // self.every + 2) + 2 ** 20  # whole chunks, and room for metadata
        free = os.statvfs(self.path.parent)
        if free.f_bavail * free.f_frsize < need:
            raise OSError(errno.ENOSPC, f"No space left on device for {need:,} more bytes", str(self.path))
        if resource is not None:
            limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
            if limit != resource.RLIM_INFINITY and self.path.stat().st_size + need > limit:
                raise OSError(errno.EFBIG, f"File too large for the file-size limit ({limit:,} bytes)", str(self.path))

    def _abandon(self) -> None:
        fh, self._file, self._buffer = self._file, None, []
        try:
            fh.close()
        except Exception:  # the cache it could not write is lost either way
            pass

    @property
    def total(self) -> int:
        """Rounds recorded (written or buffered)."""
        return self.rows + len(self._buffer)

    def close(self) -> None:
        """Write what is buffered and close the file (closed also when the write fails: a full disk)."""
        if self._file is None:
            return
        try:
            self.flush()
        finally:
            fh, self._file = self._file, None
            fh.close()


def load_decisions(run_dir: str | Path, keys=None) -> dict[str, np.ndarray]:
    """The per-round arrays of a run (rounds x devices; ``positions``, when devices move: rounds x
    devices x 2, in metres) as numpy arrays; ``keys``: only these (default: all)."""
    run_dir = Path(run_dir)
    if (run_dir / DECISIONS).exists():
        import h5py

        problem = unreadable_file(run_dir / DECISIONS)
        if problem is not None:  # a FIFO would never answer HDF5's reads
            raise UnsafeOutput(f"{run_dir / DECISIONS}: {problem}; wirelessfl reads regular files only")

        with h5py.File(run_dir / DECISIONS, "r", libver="latest", swmr=True) as fh:
            return {k: fh[k][()] for k in (fh.keys() if keys is None else keys) if k in fh}
    if (run_dir / "decisions.npz").exists():  # runs written before decisions.h5
        with np.load(run_dir / "decisions.npz", allow_pickle=False) as data:
            return {k: data[k] for k in (ARRAY_KEYS if keys is None else keys) if k in data}
    raise FileNotFoundError(f"{run_dir}: no {DECISIONS} (was the run made with run.record_devices = false?)")
