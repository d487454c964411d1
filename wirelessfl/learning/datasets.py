"""Datasets: Fashion-MNIST / MNIST (IDX files), CIFAR-10 (python batches) and FedProx Synthetic.

Every loader returns a :class:`Dataset` of normalised float32 tensors. Nothing here knows about
devices, time or the channel; splitting the training set over devices is ``partition``'s job
(except for Synthetic, which is generated per device, see :func:`synthetic_federated`). The
dataset parts that a scenario names (wirelessfl.learning.loaders) call these loaders.

Where files are looked for (first hit wins):

1. ``data_dir`` if given: ``data_dir/<dataset folder>`` then ``data_dir`` itself (and nothing else);
2. otherwise ``$WIRELESSFL_DATA/<dataset folder>`` then ``$WIRELESSFL_DATA``;
3. otherwise the Debian location ``/usr/share/datasets/<dataset folder>``.

Decoded and normalised arrays are cached (see ``dataset_cache``): a run maps them into memory
instead of decoding the files again.

Dataset folders: ``fashion-mnist`` (or ``fashion_mnist``), ``mnist``, ``cifar10`` (or ``cifar-10``).
"""
from __future__ import annotations

import gzip
import math
import io
import os
import pickle
import struct
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import torch

from . import DatasetError
from .dataset_cache import cached_arrays

__all__ = [
    "Dataset",
    "DatasetNotFoundError",
    "SyntheticFederated",
    "DATASET_NAMES",
    "load_dataset",
    "read_idx",
    "synthetic_federated",
]

DATASET_NAMES = ("fashion_mnist", "mnist", "cifar10", "synthetic")

_SYSTEM_DIR = Path("/usr/share/datasets")
_FOLDERS = {
    "fashion_mnist": ("fashion-mnist", "fashion_mnist"),
    "mnist": ("mnist",),
    "cifar10": ("cifar10", "cifar-10"),
}
# Per-channel (mean, std) of the training images scaled to [0, 1] (the usual published values).
_NORMALISATION = {
    "fashion_mnist": ((0.2860,), (0.3530,)),
    "mnist": ((0.1307,), (0.3081,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
}
_HOW_TO_GET = {
    "fashion_mnist": "on Debian/Ubuntu `apt-get install dataset-fashion-mnist`, or put the four IDX files "
    "(train-images-idx3-ubyte.gz, ...) in a folder and set WIRELESSFL_DATA or the scenario's data_dir",
    "mnist": "put the four MNIST IDX files in a folder (e.g. $WIRELESSFL_DATA/mnist) and set WIRELESSFL_DATA "
    "or the scenario's data_dir",
    "cifar10": "download cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html into a "
    "data directory (extracting it is optional) and set WIRELESSFL_DATA or the scenario's data_dir",
}
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


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files were not found; the message lists where we looked and how to get them."""




@dataclass(frozen=True, eq=False)
class Dataset:
    """A train/test split as tensors (treat the tensors as read-only: they may be shared).

    x_train, x_test: float32, shape (n, *input_shape), normalised ((x/255 - mean)/std for images).
    y_train, y_test: int64 class labels in [0, num_classes).
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    input_shape: tuple[int, ...]

    @classmethod
    def from_arrays(cls, name: str, x_train, y_train, x_test, y_test, num_classes: int | None = None) -> "Dataset":
        """A Dataset from arrays (numpy or tensors): features as float32, labels as int64 in
        [0, num_classes) (default: the largest label + 1); ValueError naming what does not fit."""
        xs = [torch.as_tensor(np.asarray(x, dtype=np.float32)) for x in (x_train, x_test)]
        ys = [torch.as_tensor(np.asarray(y).astype(np.int64)).reshape(-1) for y in (y_train, y_test)]
        for split, x, y in (("train", xs[0], ys[0]), ("test", xs[1], ys[1])):
            if x.ndim < 2 or x.shape[0] != y.shape[0] or x.shape[0] == 0:
                raise ValueError(f"dataset {name!r}: {split} features of shape {tuple(x.shape)} and {y.shape[0]} "
                                 "labels: need one row per label, at least one")
        if xs[0].shape[1:] != xs[1].shape[1:]:
            raise ValueError(f"dataset {name!r}: train samples of shape {tuple(xs[0].shape[1:])}, test samples of "
                             f"{tuple(xs[1].shape[1:])}")
        top = int(max(ys[0].max(), ys[1].max())) + 1
        classes = top if num_classes is None else int(num_classes)
        if min(int(ys[0].min()), int(ys[1].min())) < 0 or top > classes:
            raise ValueError(f"dataset {name!r}: labels must lie in [0, {classes})")
        return cls(name=name, x_train=xs[0], y_train=ys[0], x_test=xs[1], y_test=ys[1], num_classes=classes,
                   input_shape=tuple(int(s) for s in xs[0].shape[1:]))

    def __repr__(self) -> str:  # tensors would print thousands of numbers
        return (
            f"Dataset(name={self.name!r}, train={len(self.y_train)}, test={len(self.y_test)}, "
            f"num_classes={self.num_classes}, input_shape={self.input_shape})"
        )


# ----------------------------------------------------------------------------------------------
# public entry point


def load_dataset(name: str, data_dir: str | os.PathLike | None = None) -> Dataset:
    """Load dataset ``name`` ("fashion_mnist", "mnist" or "cifar10") as normalised tensors.

    ``data_dir`` overrides the search path (see the module docstring). Raises
    :class:`DatasetNotFoundError` when the files are missing and ``ValueError`` for an unknown
    name. "synthetic" is generated per device: use :func:`synthetic_federated` instead.
    """
    if name == "synthetic":
        raise ValueError(
            "dataset 'synthetic' is generated per device: call "
            "synthetic_federated(num_devices, alpha, beta, samples_per_device, rng) instead of load_dataset"
        )
    if name not in _FOLDERS:
        raise ValueError(f"unknown dataset {name!r}; allowed: {', '.join(DATASET_NAMES)}")
    location = _locate(name, data_dir)
    try:
        x_train, y_train, x_test, y_test = cached_arrays(name, _sources(name, location),
                                                         lambda: _decoded(name, location))
    except (OSError, EOFError, ValueError, pickle.UnpicklingError, tarfile.TarError, zlib.error,
            struct.error, MemoryError, IndexError, KeyError, TypeError, AttributeError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise DatasetError(f"dataset {name!r} in {location} cannot be read: {reason}") from None
    return Dataset(
        name=name,
        x_train=torch.from_numpy(x_train),
        y_train=torch.from_numpy(y_train),
        x_test=torch.from_numpy(x_test),
        y_test=torch.from_numpy(y_test),
        num_classes=10,
        input_shape=tuple(int(s) for s in x_train.shape[1:]),
    )


def _decoded(name: str, location: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The dataset's normalised images (float32) and labels (int64), decoded from its files."""
    xtr, ytr, xte, yte = _load_raw(name, str(location))
    mean, std = _NORMALISATION[name]
    return _normalise(xtr, mean, std), ytr.astype(np.int64), _normalise(xte, mean, std), yte.astype(np.int64)


def _sources(name: str, location: Path) -> list[Path]:
    """The files the dataset at ``location`` is decoded from (what the cache's checksum covers)."""
    if name == "cifar10":
        return [location] if location.is_file() else [location / b for b in (*_CIFAR_TRAIN, _CIFAR_TEST)]
    return list(_idx_files(location).values())


def _normalise(x: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    t = torch.from_numpy(x.astype(np.float32)).div_(255.0)  # astype copies: the decoded array stays read-only
    m = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)
    return t.sub_(m).div_(s).numpy()


def _load_raw(name: str, location: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if name == "cifar10":
        arrays = _load_cifar10(Path(location))
    else:
        files = _idx_files(Path(location))
        assert files is not None  # _locate checked it
        arrays = (
            read_idx(files["train_images"])[:, None, :, :],
            read_idx(files["train_labels"]),
            read_idx(files["test_images"])[:, None, :, :],
            read_idx(files["test_labels"]),
        )
    for a in arrays:
        a.flags.writeable = False
    return arrays


# ----------------------------------------------------------------------------------------------
# locating files


def _search_dirs(name: str, data_dir) -> list[Path]:
    if data_dir is not None:
        roots, with_root = [Path(data_dir)], True
    elif os.environ.get("WIRELESSFL_DATA"):
        roots, with_root = [Path(os.environ["WIRELESSFL_DATA"])], True
    else:
        roots, with_root = [_SYSTEM_DIR], False  # /usr/share/datasets itself holds no dataset
    dirs = []
    for root in roots:
        dirs.extend(root / folder for folder in _FOLDERS[name])
        if with_root:
            dirs.append(root)
    return dirs


def _locate(name: str, data_dir) -> Path:
    """Return the folder (or CIFAR tarball) that holds dataset ``name``; raise if none does."""
    looked: list[str] = []
    for d in _search_dirs(name, data_dir):
        if name == "cifar10":
            for cand in (d / _CIFAR_FOLDER, d):
                looked.append(str(cand))
                if all((cand / b).is_file() for b in (*_CIFAR_TRAIN, _CIFAR_TEST)):
                    return cand.resolve()
            tarball = d / _CIFAR_TARBALL
            looked.append(str(tarball))
            if tarball.is_file():
                return tarball.resolve()
        else:
            looked.append(str(d))
            if _idx_files(d) is not None:
                return d.resolve()
    need = (
        f"{_CIFAR_FOLDER}/ or {_CIFAR_TARBALL}"
        if name == "cifar10"
        else "train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-images-idx3-ubyte[.gz], "
        "t10k-labels-idx1-ubyte[.gz]"
    )
    raise DatasetNotFoundError(
        f"dataset {name!r} not found (need {need}); looked in: {', '.join(looked)}; to get it: {_HOW_TO_GET[name]}"
    )


def _idx_files(folder: Path) -> dict[str, Path] | None:
    """Map train/test images/labels to their files in ``folder`` (None if any is missing)."""
    if not folder.is_dir():
        return None
    found = {}
    for key, (stem, ndim) in _IDX_STEMS.items():
        # Accept the canonical names and the dotted variant some mirrors use, gzipped or not.
        names = [f"{stem}-idx{ndim}-ubyte", f"{stem}.idx{ndim}-ubyte"]
        hit = next((folder / n for base in names for n in (base + ".gz", base) if (folder / n).is_file()), None)
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


# ----------------------------------------------------------------------------------------------
# FedProx Synthetic(alpha, beta)


class SyntheticFederated(NamedTuple):
    """A generated federated dataset: the pooled Dataset and, per device, indices into it."""

    dataset: Dataset
    train_indices: list[np.ndarray]  # per device, into dataset.x_train
    test_indices: list[np.ndarray]  # per device, into dataset.x_test


def synthetic_federated(
    num_devices: int,
    alpha: float,
    beta: float,
    samples_per_device: int | Sequence[int] | None,
    rng: np.random.Generator,
    *,
    dim: int = 60,
    num_classes: int = 10,
    test_fraction: float = 0.2,
) -> SyntheticFederated:
    """Generate FedProx's Synthetic(alpha, beta) (Li et al., "Federated Optimization in Heterogeneous
    Networks", 2020, sec. 5.1), one local model per device.

    Device k: u_k ~ N(0, alpha^2), B_k ~ N(0, beta^2) (alpha, beta are standard deviations, as in
    the FedProx code); W_k in R^{10x60} and b_k in R^10 with entries ~ N(u_k, 1); features
    x ~ N(v_k, Sigma) with v_k[j] ~ N(B_k, 1) and Sigma = diag(j^-1.2), j = 1..60; label
    y = argmax(W_k x + b_k). alpha controls how much local models differ, beta how much local
    feature distributions differ (Synthetic(0,0) still differs per device; (1,1) is the hard case).

    samples_per_device: an int, one int per device, or None for FedProx's power law
    (lognormal(4, 2) + 50). Each device's samples are split into train/test by ``test_fraction``.
    Features are not normalised; input_shape is (dim,).
    """
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1, got {num_devices}")
    if samples_per_device is None:
        counts = (rng.lognormal(4.0, 2.0, num_devices)).astype(np.int64) + 50
    else:
        counts = np.broadcast_to(np.asarray(samples_per_device, dtype=np.int64), (num_devices,)).copy()
    if np.any(counts < 2):
        raise ValueError("each device needs at least 2 samples (one train, one test)")
    sigma_sqrt = np.arange(1, dim + 1, dtype=np.float64) ** (-1.2 / 2)
    u = rng.normal(0.0, alpha, num_devices)
    b_mean = rng.normal(0.0, beta, num_devices)
    xs_tr, ys_tr, xs_te, ys_te = [], [], [], []
    train_idx, test_idx = [], []
    n_tr = n_te = 0
    for k in range(num_devices):
        W = rng.normal(u[k], 1.0, (dim, num_classes))
        b = rng.normal(u[k], 1.0, num_classes)
        v = rng.normal(b_mean[k], 1.0, dim)
        x = v + rng.standard_normal((counts[k], dim)) * sigma_sqrt  # diagonal covariance
        y = np.argmax(x @ W + b, axis=1)  # softmax is monotone: argmax of the logits
        n_test = max(1, int(round(test_fraction * counts[k]))) if test_fraction > 0 else 0
        n_train = int(counts[k]) - n_test
        xs_tr.append(x[:n_train]), ys_tr.append(y[:n_train])
        xs_te.append(x[n_train:]), ys_te.append(y[n_train:])
        train_idx.append(np.arange(n_tr, n_tr + n_train))
        test_idx.append(np.arange(n_te, n_te + n_test))
        n_tr += n_train
        n_te += n_test
    dataset = Dataset(
        name=f"synthetic({alpha:g},{beta:g})",
        x_train=torch.from_numpy(np.concatenate(xs_tr).astype(np.float32)),
        y_train=torch.from_numpy(np.concatenate(ys_tr).astype(np.int64)),
        x_test=torch.from_numpy(np.concatenate(xs_te).astype(np.float32)),
        y_test=torch.from_numpy(np.concatenate(ys_te).astype(np.int64)),
        num_classes=num_classes,
        input_shape=(dim,),
    )
    return SyntheticFederated(dataset, train_idx, test_idx)
