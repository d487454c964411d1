"""The file formats of the datasets read from files: where a format's files are in a folder and how
they are read into uint8 images and integer labels. Numpy only (no torch): a dataset part declares
its format (``wirelessfl.learning.loaders.FilesDataset.files``) without importing torch.

- :class:`IdxFiles`: four IDX files, train/test images and labels, gzipped or not (MNIST,
  Fashion-MNIST); images get a channel axis, (n, 1, H, W).
- :class:`CifarBatches`: CIFAR-10's python batches, in a folder or the tarball (read in memory, never
  extracted, unpickled without running code); images (n, 3, 32, 32).

A format of your own fits :class:`FileFormat`.
"""
from __future__ import annotations

import gzip
import io
import math
import os
import pickle
import struct
import tarfile
from pathlib import Path
from typing import Protocol

import numpy as np

__all__ = ["CifarBatches", "FileFormat", "IDX_MAX_BYTES", "IdxFiles", "NotRegularFile", "read_idx"]


_IDX_STEMS = {
    "train_images": ("train-images", 3),
    "train_labels": ("train-labels", 1),
    "test_images": ("t10k-images", 3),
    "test_labels": ("t10k-labels", 1),
}
_CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_CIFAR_TEST = "test_batch"
_CIFAR_TARBALL = "cifar-10-python.tar.gz"
_CIFAR_MAX_BYTES = 64 * 2 ** 20  # a batch is 31 MB
_CIFAR_FOLDER = "cifar-10-batches-py"


class FileFormat(Protocol):
    """How a dataset's files are laid out and read."""

    need: str
    """What the files are, for the message when none are found."""

    def locate(self, folder: Path, looked: list[str]) -> Path | None:
        """The location of the dataset's files in or at ``folder`` (a folder or a file), or None;
        every place looked at is appended to ``looked``."""
        ...

    def sources(self, location: Path) -> list[Path]:
        """The files at ``location`` the data are read from (what the cache's checksum covers)."""
        ...

    def read(self, location: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(train images, train labels, test images, test labels): images (n, C, H, W) of 0..255."""
        ...


class IdxFiles(FileFormat):
    """Four IDX files in a folder: ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
    ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte`` (or ``.idx3-ubyte`` spellings; each
    gzipped or not). The images get one channel."""

    need = ("train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz], "
            "t10k-labels-idx1-ubyte[.gz]")

    def locate(self, folder: Path, looked: list[str]) -> Path | None:
        looked.append(str(folder))
        return folder.resolve() if _idx_files(folder) is not None else None

    def sources(self, location: Path) -> list[Path]:
        return list(_idx_files(location).values())

    def read(self, location: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        files = _idx_files(location)
        assert files is not None  # locate checked it
        return (
            read_idx(files["train_images"])[:, None, :, :],
            read_idx(files["train_labels"]),
            read_idx(files["test_images"])[:, None, :, :],
            read_idx(files["test_labels"]),
        )

    def __repr__(self) -> str:
        return "IdxFiles()"


class CifarBatches(FileFormat):
    """CIFAR-10's python batches ``data_batch_1`` .. ``data_batch_5`` and ``test_batch``: in
    ``cifar-10-batches-py/`` or the folder itself, else in ``cifar-10-python.tar.gz``."""

    need = f"{_CIFAR_FOLDER}/ or {_CIFAR_TARBALL}"

    def locate(self, folder: Path, looked: list[str]) -> Path | None:
        for cand in (folder / _CIFAR_FOLDER, folder):
            looked.append(str(cand))
            _refuse_irregular([cand / b for b in (*_CIFAR_TRAIN, _CIFAR_TEST)])
            if all((cand / b).is_file() for b in (*_CIFAR_TRAIN, _CIFAR_TEST)):
                return cand.resolve()
        tarball = folder / _CIFAR_TARBALL
        looked.append(str(tarball))
        _refuse_irregular([tarball])
        return tarball.resolve() if tarball.is_file() else None

    def sources(self, location: Path) -> list[Path]:
        return [location] if location.is_file() else [location / b for b in (*_CIFAR_TRAIN, _CIFAR_TEST)]

    def read(self, location: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return _load_cifar10(location)

    def __repr__(self) -> str:
        return "CifarBatches()"


def _refuse_irregular(paths) -> None:
    """NotRegularFile for the first of ``paths`` that is there but is a FIFO, a device or a socket:
    reading it would wait forever or never end, and "not found" would send the user looking for it."""
    from ..files import unreadable_file

    for path in paths:
        problem = unreadable_file(path)
        if problem is not None and "not a regular file" in problem:
            raise NotRegularFile(f"{path} {problem}")


class NotRegularFile(ValueError):
    """A dataset's file is there but is not a regular file (a FIFO, a device, a socket)."""


def _idx_files(folder: Path) -> dict[str, Path] | None:
    """Map train/test images/labels to their files in ``folder`` (None if any is missing)."""
    if not folder.is_dir():
        return None
    found = {}
    for key, (stem, ndim) in _IDX_STEMS.items():
        # Accept the canonical names and the dotted variant some mirrors use, gzipped or not.
        names = [f"{stem}-idx{ndim}-ubyte", f"{stem}.idx{ndim}-ubyte"]
        candidates = [folder / n for base in names for n in (base + ".gz", base)]
        _refuse_irregular(candidates)
        hit = next((path for path in candidates if path.is_file()), None)
        if hit is None:
            return None
        found[key] = hit
    return found


# ----------------------------------------------------------------------------------------------
# IDX format

_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


IDX_MAX_BYTES = 2 ** 30
"""The most data one IDX file may declare (1 GiB; Fashion-MNIST's training images are 47 MB): the
header is read first, so a small gzip file that would inflate to gigabytes is refused unread."""


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read one IDX file (gzipped or plain, detected from the content) into a numpy array.

    Format: two zero bytes, a type code, the number of dimensions, then one big-endian uint32 per
    dimension, then the data in row-major order. The header is checked before the data are read
    (or decompressed): its size must be at most ``IDX_MAX_BYTES`` and match the data exactly.
    """
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"  # gzip magic, whatever the file is called
        f.seek(0)
        stream = gzip.GzipFile(fileobj=f) if gzipped else f
        head = stream.read(4)
        if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in _IDX_DTYPES:
            raise ValueError(f"{path}: not an IDX file (bad magic {head!r})")
        dtype = np.dtype(_IDX_DTYPES[head[2]])
        dims = struct.unpack(f">{head[3]}I", stream.read(4 * head[3]))
        nbytes = math.prod(dims) * dtype.itemsize
        if nbytes > IDX_MAX_BYTES:
            raise ValueError(f"{path}: IDX header declares shape {dims} ({nbytes:,} bytes), more than the "
                             f"{IDX_MAX_BYTES:,} an IDX dataset file may hold")
        raw = stream.read(nbytes + 1)  # one byte more: data past the declared shape is an error too
    if len(raw) != nbytes:
        held = f"{len(raw)}" if len(raw) <= nbytes else f"more than {nbytes}"
        raise ValueError(f"{path}: IDX header says shape {dims} but the file holds {held} data bytes")
    arr = np.frombuffer(raw, dtype=dtype, count=math.prod(dims)).reshape(dims)
    return arr.astype(dtype.newbyteorder("="))


# ----------------------------------------------------------------------------------------------
# CIFAR-10 python batches, unpickled without running arbitrary code


def _allowed_globals() -> dict[tuple[str, str], object]:
    # numpy 2 moved numpy.core to numpy._core; pickles written by either name must load.
    try:
        from numpy._core import multiarray, numeric
    except ImportError:  # numpy < 2
        from numpy.core import multiarray, numeric  # type: ignore[no-redef]
    allowed: dict[tuple[str, str], object] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        # Python 3 writes bytes in protocols <= 2 as _codecs.encode(text, "latin1").
        ("_codecs", "encode"): _latin1_encode,
    }
    for pkg in ("numpy.core", "numpy._core"):
        allowed[(f"{pkg}.multiarray", "_reconstruct")] = multiarray._reconstruct  # protocol <= 4 arrays
        allowed[(f"{pkg}.numeric", "_frombuffer")] = numeric._frombuffer  # protocol 5 arrays
    return allowed


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing _codecs.encode with encoding {encoding!r}")
    return text.encode("latin1")


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that can only rebuild plain containers and numpy arrays.

    A pickle may name any importable callable and call it while loading; a CIFAR batch needs
    nothing but dicts, lists, bytes, ints and numpy arrays, so every other global is refused.
    """

    _allowed: dict[tuple[str, str], object] | None = None

    def find_class(self, module: str, name: str):
        if _RestrictedUnpickler._allowed is None:
            _RestrictedUnpickler._allowed = _allowed_globals()
        obj = self._allowed.get((module, name))
        if obj is None:
            raise pickle.UnpicklingError(
                f"refusing to load global {module}.{name}: a dataset batch may only contain numpy arrays and plain data"
            )
        return obj


def _unpickle_batch(data: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    # encoding="bytes": the official batches were pickled by Python 2 (str keys become bytes).
    batch = _RestrictedUnpickler(io.BytesIO(data), encoding="bytes").load()
    if not isinstance(batch, dict):
        raise ValueError(f"{where}: expected a dict, got {type(batch).__name__}")
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    if "data" not in batch or "labels" not in batch:
        raise ValueError(f"{where}: a CIFAR-10 batch needs 'data' and 'labels', found {sorted(batch)}")
    x = np.asarray(batch["data"], dtype=np.uint8)
    y = np.asarray(batch["labels"], dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != 3 * 32 * 32 or x.shape[0] != y.shape[0]:
        raise ValueError(f"{where}: data of shape {x.shape} and {y.shape[0]} labels is not a CIFAR-10 batch")
    return x.reshape(-1, 3, 32, 32), y


def _load_cifar10(location: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    names = (*_CIFAR_TRAIN, _CIFAR_TEST)

    def sized(where: str, nbytes: int) -> None:  # checked before reading (or inflating) it
        if nbytes > _CIFAR_MAX_BYTES:
            raise ValueError(f"{where}: {nbytes:,} bytes, more than a CIFAR-10 batch ({_CIFAR_MAX_BYTES:,} at most)")

    if location.is_dir():
        blobs = {}
        for n in names:
            sized(str(location / n), (location / n).stat().st_size)
            blobs[n] = (location / n).read_bytes()
    else:
        blobs = {}
        with tarfile.open(location, "r:*") as tar:  # read members in memory: nothing is extracted
            for member in tar.getmembers():
                base = member.name.rsplit("/", 1)[-1]
                if member.isfile() and base in names:
                    sized(f"{location}/{member.name}", member.size)
                    blobs[base] = tar.extractfile(member).read()
        missing = [n for n in names if n not in blobs]
        if missing:
            raise ValueError(f"{location}: tarball lacks {', '.join(missing)}")
    parts = [_unpickle_batch(blobs[n], f"{location}/{n}") for n in names]
    xtr = np.concatenate([p[0] for p in parts[:-1]])
    ytr = np.concatenate([p[1] for p in parts[:-1]])
    return xtr, ytr, parts[-1][0], parts[-1][1]
