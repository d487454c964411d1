"""Datasets: Fashion-MNIST / MNIST (IDX files), CIFAR-10 (python batches) and FedProx Synthetic.

Every loader returns a :class:`Dataset` of normalised float32 tensors. Nothing here knows about
devices, time or the channel; splitting the training set over devices is ``partition``'s job
(except for Synthetic, which is generated per device, see :func:`synthetic_federated`). The
dataset parts that a scenario names (wirelessfl.learning.loaders) call these loaders; a dataset
read from files (:func:`load_files`) is read as its part declares: its folders, its file format
(wirelessfl.learning.file_formats), its normalisation and where to get it. No dataset is known here
by its name.

Where files are looked for (first hit wins):

1. ``data_dir`` if given: ``data_dir/<dataset folder>`` then ``data_dir`` itself (and nothing else);
2. otherwise ``$WIRELESSFL_DATA/<dataset folder>`` then ``$WIRELESSFL_DATA``;
3. otherwise the Debian location ``/usr/share/datasets/<dataset folder>``.

Decoded and normalised arrays are cached (see ``dataset_cache``): a run maps them into memory
instead of decoding the files again.

Dataset folders (the built-ins declare them): ``fashion-mnist`` (or ``fashion_mnist``), ``mnist``,
``cifar10`` (or ``cifar-10``).
"""
from __future__ import annotations

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
# the file readers, here for the code that imports them from this module
from .file_formats import IDX_MAX_BYTES, NotRegularFile, _RestrictedUnpickler, read_idx  # noqa: F401

__all__ = [
    "Dataset",
    "DatasetNotFoundError",
    "SyntheticFederated",
    "DATASET_NAMES",
    "load_dataset",
    "load_files",
    "read_idx",
    "synthetic_federated",
]


DATASET_NAMES = ("fashion_mnist", "mnist", "cifar10", "synthetic")

_SYSTEM_DIR = Path("/usr/share/datasets")


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
# public entry points


def load_dataset(name: str, data_dir: str | os.PathLike | None = None) -> Dataset:
    """Load the built-in dataset ``name`` ("fashion_mnist", "mnist" or "cifar10") as normalised tensors.

    ``data_dir`` overrides the search path (see the module docstring). Raises
    :class:`DatasetNotFoundError` when the files are missing and ``ValueError`` for an unknown
    name. "synthetic" is generated per device: use :func:`synthetic_federated` instead.
    """
    return load_files(_files_dataset(name), data_dir)


def load_files(dataset, data_dir: str | os.PathLike | None = None) -> Dataset:
    """Load a dataset read from files as its part declares them (a
    :class:`wirelessfl.learning.loaders.FilesDataset`): ``name``, the ``folders`` that may hold it
    under a data root, the ``files`` format (where the files are and how they are read),
    ``normalisation`` ((mean, std) per channel of the images scaled to [0, 1]), ``how_to_get`` (said
    when the files are missing) and ``num_classes``."""
    name = dataset.name
    location = _locate(dataset, data_dir)
    try:
        x_train, y_train, x_test, y_test = cached_arrays(name, dataset.files.sources(location),
                                                         lambda: _decoded(dataset, location))
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
        num_classes=int(dataset.num_classes),
        input_shape=tuple(int(s) for s in x_train.shape[1:]),
    )


def _files_dataset(name: str):
    """The built-in dataset part called ``name``, which must be read from files."""
    from . import DATASETS

    if name not in DATASETS.builtins:
        raise ValueError(f"unknown dataset {name!r}; allowed: {', '.join(DATASET_NAMES)}")
    part = DATASETS.load(name)
    if getattr(part, "files", None) is None:
        raise ValueError(
            f"dataset {name!r} is generated per device, not read from files: call "
            "synthetic_federated(num_devices, alpha, beta, samples_per_device, rng) (its part's load() does) "
            "instead of load_dataset"
        )
    return part


def _decoded(dataset, location: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The dataset's normalised images (float32) and labels (int64), decoded from its files."""
    xtr, ytr, xte, yte = _load_raw(dataset, location)
    mean, std = dataset.normalisation
    return _normalise(xtr, mean, std), ytr.astype(np.int64), _normalise(xte, mean, std), yte.astype(np.int64)


def _normalise(x: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    t = torch.from_numpy(x.astype(np.float32)).div_(255.0)  # astype copies: the decoded array stays read-only
    m = torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(-1, 1, 1)
    return t.sub_(m).div_(s).numpy()


def _load_raw(dataset, location: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    arrays = dataset.files.read(Path(location))
    for a in arrays:
        a.flags.writeable = False
    return arrays


# ----------------------------------------------------------------------------------------------
# locating files


def _search_dirs(dataset, data_dir) -> list[Path]:
    if data_dir is not None:
        roots, with_root = [Path(data_dir)], True
    elif os.environ.get("WIRELESSFL_DATA"):
        roots, with_root = [Path(os.environ["WIRELESSFL_DATA"])], True
    else:
        roots, with_root = [_SYSTEM_DIR], False  # /usr/share/datasets itself holds no dataset
    dirs = []
    for root in roots:
        dirs.extend(root / folder for folder in dataset.folders)
        if with_root:
            dirs.append(root)
    return dirs


def _locate(dataset, data_dir) -> Path:
    """The folder (or file, e.g. CIFAR's tarball) that holds ``dataset`` (a dataset part read from
    files, or a built-in's name); DatasetNotFoundError if none does."""
    if isinstance(dataset, str):
        dataset = _files_dataset(dataset)
    looked: list[str] = []
    for d in _search_dirs(dataset, data_dir):
        try:
            found = dataset.files.locate(d, looked)
        except NotRegularFile as exc:  # there, but a FIFO or a device: neither missing nor readable
            raise DatasetError(f"dataset {dataset.name!r}: {exc}; it reads regular files only") from None
        if found is not None:
            return found
    raise DatasetNotFoundError(
        f"dataset {dataset.name!r} not found (need {dataset.files.need}); looked in: {', '.join(looked)}; "
        f"to get it: {dataset.how_to_get}"
    )


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
