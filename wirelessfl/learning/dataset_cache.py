"""A cache of decoded, normalised datasets: memory-mapped arrays beside a checksum of their sources.

Decoding Fashion-MNIST's gzipped IDX files and normalising them costs about 0.8 s of every run's
start-up (CIFAR-10 several seconds). The first run stores the four normalised arrays as ``.npy``
files; later runs map them into memory (milliseconds; pages are read on first use and shared by
the processes of a sweep through the page cache).

Where: ``$WIRELESSFL_CACHE``, else ``$XDG_CACHE_HOME/wirelessfl``, else ``~/.cache/wirelessfl``;
``WIRELESSFL_CACHE=off`` turns the cache off. An entry is the folder ``datasets/NAME-KEY``, KEY the
SHA-256 of the cache format and of every source file's name and bytes (hashing Fashion-MNIST's
26 MB takes 20 ms), so a changed or replaced file makes a new entry. An entry is written into a
temporary folder and renamed into place: a reader sees all of it or nothing. A cache folder that
cannot be written, or an entry that cannot be read back as what it should be, is passed over: the
dataset is then decoded as without a cache, and a run never fails because of its cache. Nothing
in the cache is read or written through a symbolic link (a link at ``datasets`` or at an entry
passes the cache over), and only regular files are read from it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..files import UnsafeOutput, check_folder, make_folder, refuse_links

__all__ = ["cache_root", "cached_arrays"]

FORMAT = "wirelessfl-dataset-cache-1"
"""Part of every key: a change in what is stored (normalisation, layout) gives new entries."""
ARRAYS = ("x_train", "y_train", "x_test", "y_test")


def cache_root() -> Path | None:
    """The cache folder (None: the cache is off)."""
    chosen = os.environ.get("WIRELESSFL_CACHE")
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "0", "false", "no") else Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "wirelessfl"


_digests: dict[tuple[str, int, int], str] = {}  # (path, size, mtime): content digest, per process


def _digest(path: Path) -> str:
    stat = path.stat()
    memo = (str(path), stat.st_size, stat.st_mtime_ns)
    if memo not in _digests:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        _digests[memo] = h.hexdigest()
    return _digests[memo]


def source_key(sources: Sequence[Path]) -> str:
    """The checksum of the cache format and of the source files' names and contents."""
    h = hashlib.sha256(FORMAT.encode())
    for path in sorted(Path(p) for p in sources):
        h.update(f"\0{path.name}\0{_digest(path)}".encode())
    return h.hexdigest()[:24]


def _read(entry: Path) -> tuple[np.ndarray, ...] | None:
    """The entry's arrays, copy-on-write mapped (writes stay in the process), or None if it is
    missing or not four arrays of the expected kinds."""
    try:
        check_folder(entry.parent)
        check_folder(entry)
        refuse_links(entry, [f"{name}.npy" for name in ARRAYS])  # a FIFO there would never end
        arrays = tuple(np.load(entry / f"{name}.npy", mmap_mode="c", allow_pickle=False) for name in ARRAYS)
    except (OSError, ValueError, EOFError):  # UnsafeOutput is a ValueError
        return None
    x_train, y_train, x_test, y_test = arrays
    if (x_train.dtype != np.float32 or x_test.dtype != np.float32 or y_train.dtype != np.int64
            or y_test.dtype != np.int64 or x_train.ndim < 2 or x_train.shape[1:] != x_test.shape[1:]
            or y_train.shape != x_train.shape[:1] or y_test.shape != x_test.shape[:1]):
        return None
    return arrays


def _write(entry: Path, arrays: Sequence[np.ndarray]) -> None:
    """Store ``arrays`` as ``entry`` (all or nothing); quietly nothing if the folder is not writable."""
    tmp = None
    try:
        make_folder(entry.parent)  # never through a link planted at datasets
        check_folder(entry)
        tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
        for name, array in zip(ARRAYS, arrays):
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        if entry.exists():  # an entry that could not be read back: replace it
            shutil.rmtree(entry, ignore_errors=True)
        os.rename(tmp, entry)
        tmp = None
    except (OSError, UnsafeOutput):
        pass  # another process renamed its copy first, the cache folder is not writable, or holds a link
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def cached_arrays(name: str, sources: Sequence[Path],
                  decode: Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
                  ) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_test, y_test) of dataset ``name`` made from the files ``sources``: read
    from the cache when an entry for those exact files exists, else ``decode()`` and store them."""
    root = cache_root()
    if root is None:
        return decode()
    try:
        entry = root / "datasets" / f"{name}-{source_key(sources)}"
    except OSError:
        return decode()
    arrays = _read(entry)
    if arrays is not None:
        return arrays
    arrays = decode()
    _write(entry, arrays)
    return arrays
