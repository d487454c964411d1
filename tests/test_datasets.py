"""Dataset loaders: IDX and CIFAR-10 formats, the restricted unpickler, search paths, Synthetic."""
from __future__ import annotations

import gzip
import io
import os
import pickle
import struct
import tarfile

import numpy as np
import pytest
import torch

from wirelessfl.learning import DatasetError
from wirelessfl.learning import datasets as D
from wirelessfl.learning.datasets import DatasetNotFoundError, load_dataset, read_idx, synthetic_federated


def write_idx(path, arr: np.ndarray, gz: bool) -> None:
    codes = {np.dtype(np.uint8): 0x08, np.dtype(">i4"): 0x0C, np.dtype(">f4"): 0x0D}
    arr = np.ascontiguousarray(arr)
    header = bytes([0, 0, codes[arr.dtype], arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    blob = header + arr.tobytes()
    path.write_bytes(gzip.compress(blob) if gz else blob)


def write_mnist_folder(folder, rng, n_train=6, n_test=4, gz=True):
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, n_test, dtype=np.uint8),
    }
    for name, arr in arrays.items():
        write_idx(folder / (name + (".gz" if gz else "")), arr, gz)
    return arrays


def test_real_fashion_mnist():
    try:
        ds = load_dataset("fashion_mnist")
    except DatasetNotFoundError as e:
        pytest.skip(f"Fashion-MNIST not installed: {e}")
    assert ds.x_train.shape == (60000, 1, 28, 28) and ds.x_test.shape == (10000, 1, 28, 28)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert sorted(ds.y_train.unique().tolist()) == list(range(10))
    assert sorted(ds.y_test.unique().tolist()) == list(range(10))
    assert ds.num_classes == 10 and ds.input_shape == (1, 28, 28)
    # Normalised with the training mean/std: close to zero mean, unit variance.
    assert abs(float(ds.x_train.mean())) < 0.01 and abs(float(ds.x_train.std()) - 1) < 0.01


@pytest.mark.parametrize("gz", [True, False])
def test_idx_round_trip(tmp_path, gz):
    rng = np.random.default_rng(1)
    for dtype, shape in [(np.uint8, (3, 5, 4)), (np.dtype(">i4"), (7,)), (np.dtype(">f4"), (2, 3))]:
        arr = (rng.normal(size=shape) * 100).astype(dtype)
        write_idx(tmp_path / "a.idx", arr, gz)
        back = read_idx(tmp_path / "a.idx")
        assert back.shape == shape
        np.testing.assert_array_equal(back, arr)


def test_idx_rejects_bad_files(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01" + b"\x00" * 8)
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(tmp_path / "bad")
    write_idx(tmp_path / "short", np.zeros((4, 4), np.uint8), gz=False)
    (tmp_path / "short").write_bytes((tmp_path / "short").read_bytes()[:-3])
    with pytest.raises(ValueError, match="header says shape"):
        read_idx(tmp_path / "short")


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_from_data_dir(tmp_path, gz):
    arrays = write_mnist_folder(tmp_path / "mnist", np.random.default_rng(2), gz=gz)
    ds = load_dataset("mnist", data_dir=tmp_path)
    assert ds.x_train.shape == (6, 1, 28, 28) and ds.x_test.shape == (4, 1, 28, 28)
    np.testing.assert_array_equal(ds.y_train.numpy(), arrays["train-labels-idx1-ubyte"])
    pixels = (ds.x_train[:, 0].numpy() * 0.3081 + 0.1307) * 255  # undo the normalisation
    np.testing.assert_allclose(pixels, arrays["train-images-idx3-ubyte"], atol=1e-3)


def test_env_variable_folder(tmp_path, monkeypatch):
    write_mnist_folder(tmp_path, np.random.default_rng(3), n_train=5)  # files in the folder itself
    monkeypatch.setenv("WIRELESSFL_DATA", str(tmp_path))
    assert load_dataset("mnist").x_train.shape[0] == 5


# ---------------------------------------------------------------------------------------------
# CIFAR-10


def cifar_batch_bytes(rng, n, protocol=2, bytes_keys=True):
    data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, n)]
    key = (lambda s: s.encode()) if bytes_keys else (lambda s: s)
    batch = {key("batch_label"): b"fake", key("labels"): labels, key("data"): data, key("filenames"): [b"a"] * n}
    return pickle.dumps(batch, protocol=protocol), data, labels


def write_cifar(folder, rng, n=4, protocol=2, bytes_keys=True):
    folder.mkdir(parents=True, exist_ok=True)
    parts = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        blob, data, labels = cifar_batch_bytes(rng, n, protocol, bytes_keys)
        (folder / name).write_bytes(blob)
        parts[name] = (data, labels)
    return parts


@pytest.mark.parametrize("protocol,bytes_keys", [(2, True), (pickle.HIGHEST_PROTOCOL, False)])
def test_cifar_extracted(tmp_path, protocol, bytes_keys):
    parts = write_cifar(tmp_path / "cifar-10-batches-py", np.random.default_rng(4), protocol=protocol, bytes_keys=bytes_keys)
    ds = load_dataset("cifar10", data_dir=tmp_path)
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    assert ds.input_shape == (3, 32, 32)
    assert ds.y_test.tolist() == parts["test_batch"][1]
    red = ds.x_train[4, 0].numpy() * 0.2470 + 0.4914  # first image of data_batch_2, red channel
    np.testing.assert_allclose(red * 255, parts["data_batch_2"][0][0, :1024].reshape(32, 32), atol=1e-3)


def test_cifar_tarball(tmp_path):
    src = tmp_path / "src"
    parts = write_cifar(src / "cifar-10-batches-py", np.random.default_rng(5))
    data_dir = tmp_path / "data" / "cifar10"
    data_dir.mkdir(parents=True)
    with tarfile.open(data_dir / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(src / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    ds = load_dataset("cifar10", data_dir=tmp_path / "data")
    assert ds.x_train.shape == (20, 3, 32, 32)
    assert ds.y_train[-4:].tolist() == parts["data_batch_5"][1]


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_cifar_malicious_pickle_is_refused(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    write_cifar(folder, np.random.default_rng(6))
    marker = tmp_path / "pwned"
    (folder / "data_batch_3").write_bytes(pickle.dumps({b"data": _Evil(marker), b"labels": []}, protocol=2))
    with pytest.raises(DatasetError, match=r"^dataset 'cifar10' in .* cannot be read: refusing to load global"):
        load_dataset("cifar10", data_dir=tmp_path)
    assert not marker.exists()
    # The same bytes through the standard unpickler would have run the command: the test is real.
    assert b"system" in (folder / "data_batch_3").read_bytes()


def test_damaged_or_incomplete_cifar_folders_are_one_line_errors(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    write_cifar(folder, np.random.default_rng(7))
    (folder / "data_batch_2").write_bytes(b"not a pickle at all")
    with pytest.raises(DatasetError, match="cannot be read") as err:
        load_dataset("cifar10", data_dir=tmp_path)
    assert "\n" not in str(err.value)
    (folder / "data_batch_2").write_bytes(pickle.dumps({b"data": np.zeros((3, 5), np.uint8), b"labels": [1, 2, 3]}))
    with pytest.raises(DatasetError, match="is not a CIFAR-10 batch"):
        load_dataset("cifar10", data_dir=tmp_path)


def test_restricted_unpickler_allows_only_numpy():
    arr = np.arange(6, dtype=np.int32).reshape(2, 3)
    for protocol in (2, 4, 5):
        out = D._RestrictedUnpickler(io.BytesIO(pickle.dumps({"a": arr}, protocol=protocol))).load()
        np.testing.assert_array_equal(out["a"], arr)
    with pytest.raises(pickle.UnpicklingError):
        D._RestrictedUnpickler(io.BytesIO(pickle.dumps(io.BytesIO))).load()


def test_missing_dataset_names_every_place(tmp_path):
    with pytest.raises(DatasetNotFoundError) as err:
        load_dataset("cifar10", data_dir=tmp_path)
    msg = str(err.value)
    assert isinstance(err.value, FileNotFoundError) and "\n" not in msg
    for place in (tmp_path / "cifar10", tmp_path / "cifar-10", tmp_path, tmp_path / "cifar10" / "cifar-10-python.tar.gz"):
        assert str(place) in msg
    assert "https://www.cs.toronto.edu/~kriz/cifar.html" in msg and "WIRELESSFL_DATA" in msg
    with pytest.raises(DatasetNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_dataset("fashion_mnist", data_dir=tmp_path)


def test_unknown_and_synthetic_names():
    with pytest.raises(ValueError, match="fashion_mnist"):
        load_dataset("imagenet")
    with pytest.raises(ValueError, match="synthetic_federated"):
        load_dataset("synthetic")


# ---------------------------------------------------------------------------------------------
# Synthetic(alpha, beta)


def test_synthetic_federated_shapes_and_determinism():
    a = synthetic_federated(6, 1.0, 1.0, 50, np.random.default_rng(7))
    b = synthetic_federated(6, 1.0, 1.0, 50, np.random.default_rng(7))
    ds = a.dataset
    assert ds.input_shape == (60,) and ds.x_train.shape == (6 * 40, 60) and ds.x_test.shape == (6 * 10, 60)
    assert [len(i) for i in a.train_indices] == [40] * 6 and [len(i) for i in a.test_indices] == [10] * 6
    assert np.array_equal(np.concatenate(a.train_indices), np.arange(240))
    assert torch.equal(ds.x_train, b.dataset.x_train) and torch.equal(ds.y_train, b.dataset.y_train)
    assert int(ds.y_train.min()) >= 0 and int(ds.y_train.max()) < 10
    # Power-law sizes when samples_per_device is None: at least 50 per device, not all equal.
    sizes = synthetic_federated(20, 0.5, 0.5, None, np.random.default_rng(8)).train_indices
    n = np.array([len(i) for i in sizes])
    assert n.min() >= 40 and len(set(n.tolist())) > 1


def test_synthetic_alpha_beta_make_devices_differ():
    # With large alpha/beta each device's local model dominates: label distributions differ a lot.
    def label_spread(alpha, beta):
        s = synthetic_federated(30, alpha, beta, 200, np.random.default_rng(9))
        hists = np.stack([np.bincount(s.dataset.y_train[i].numpy(), minlength=10) / len(i) for i in s.train_indices])
        return hists.max(axis=1).mean()  # mean share of each device's majority class

    assert label_spread(3.0, 3.0) > label_spread(0.0, 0.0)


# --- the cache of decoded datasets ----------------------------------------------------------------


def entries(root):
    return sorted(p.name for p in (root / "datasets").iterdir()) if (root / "datasets").exists() else []


def test_cached_dataset_equals_the_decoded_one_and_is_read_without_decoding(tmp_path, monkeypatch):
    write_mnist_folder(tmp_path / "mnist", np.random.default_rng(5), n_train=9, n_test=5)
    monkeypatch.setenv("WIRELESSFL_CACHE", str(tmp_path / "cache"))
    first = load_dataset("mnist", data_dir=tmp_path)
    assert len(entries(tmp_path / "cache")) == 1
    monkeypatch.setenv("WIRELESSFL_CACHE", "off")
    decoded = load_dataset("mnist", data_dir=tmp_path)
    monkeypatch.setenv("WIRELESSFL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(D, "_decoded", lambda *a: pytest.fail("decoded although an entry exists"))
    again = load_dataset("mnist", data_dir=tmp_path)
    for key in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(first, key), getattr(decoded, key))
        assert torch.equal(getattr(again, key), getattr(decoded, key))
        assert getattr(again, key).dtype == getattr(decoded, key).dtype
    again.x_train[0] = 99.0  # copy-on-write: a caller's write never reaches the file
    assert torch.equal(load_dataset("mnist", data_dir=tmp_path).x_train, decoded.x_train)


def test_a_changed_source_file_makes_a_new_entry_with_the_new_data(tmp_path, monkeypatch):
    rng = np.random.default_rng(6)
    arrays = write_mnist_folder(tmp_path / "mnist", rng, n_train=9, n_test=5)
    monkeypatch.setenv("WIRELESSFL_CACHE", str(tmp_path / "cache"))
    before = load_dataset("mnist", data_dir=tmp_path)
    labels = (arrays["train-labels-idx1-ubyte"] + 1) % 10  # same size, other bytes
    write_idx(tmp_path / "mnist" / "train-labels-idx1-ubyte.gz", labels, gz=True)
    after = load_dataset("mnist", data_dir=tmp_path)
    assert after.y_train.tolist() == labels.tolist() != before.y_train.tolist()
    assert len(entries(tmp_path / "cache")) == 2


def test_a_damaged_entry_is_decoded_again_and_replaced(tmp_path, monkeypatch):
    write_mnist_folder(tmp_path / "mnist", np.random.default_rng(7), n_train=9, n_test=5)
    monkeypatch.setenv("WIRELESSFL_CACHE", str(tmp_path / "cache"))
    good = load_dataset("mnist", data_dir=tmp_path)
    (entry,) = (tmp_path / "cache" / "datasets").iterdir()
    (entry / "x_train.npy").write_bytes((entry / "x_train.npy").read_bytes()[:100])  # truncated
    assert torch.equal(load_dataset("mnist", data_dir=tmp_path).x_train, good.x_train)
    assert np.load(entry / "x_train.npy").shape == tuple(good.x_train.shape)  # repaired


def test_an_unusable_cache_folder_or_off_writes_nothing_and_still_loads(tmp_path, monkeypatch):
    write_mnist_folder(tmp_path / "mnist", np.random.default_rng(8), n_train=9, n_test=5)
    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("WIRELESSFL_CACHE", str(tmp_path / "a-file"))
    assert load_dataset("mnist", data_dir=tmp_path).x_train.shape == (9, 1, 28, 28)
    monkeypatch.setenv("WIRELESSFL_CACHE", "off")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert load_dataset("mnist", data_dir=tmp_path).x_train.shape == (9, 1, 28, 28)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "mnist"]


def test_an_idx_header_is_checked_before_its_data_are_inflated(tmp_path):
    """A small gzip file that declares 3 GB is refused from its header; extra data are refused too."""
    import gzip
    import struct

    from wirelessfl.learning.datasets import IDX_MAX_BYTES

    dims = (3_000_000, 1000)  # 3 GB of uint8
    with gzip.open(tmp_path / "bomb.gz", "wb") as fh:
        fh.write(b"\x00\x00\x08\x02" + struct.pack(">2I", *dims))
        fh.write(bytes(2 ** 20))  # only 1 MB of the 3 GB follows, but a bomb would hold it all
    assert 3_000_000_000 > IDX_MAX_BYTES
    with pytest.raises(ValueError, match=r"declares shape \(3000000, 1000\) \(3,000,000,000 bytes\)"):
        read_idx(tmp_path / "bomb.gz")
    write_idx(tmp_path / "long", np.zeros((4, 4), np.uint8), gz=True)
    (tmp_path / "long").write_bytes(gzip.compress(gzip.decompress((tmp_path / "long").read_bytes()) + b"\x01"))
    with pytest.raises(ValueError, match="holds more than 16 data bytes"):
        read_idx(tmp_path / "long")


def test_a_cifar_member_larger_than_a_batch_is_refused_before_it_is_read(tmp_path):
    import io
    import tarfile

    from wirelessfl.learning.datasets import DatasetError

    with tarfile.open(tmp_path / "cifar-10-python.tar.gz", "w:gz") as tar:
        for name in ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"):
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            data = bytes(100 * 2 ** 20 if name == "data_batch_1" else 10)  # 100 MB of zeros: 100 kB gzipped
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(DatasetError, match=r"data_batch_1: 104,857,600 bytes, more than a CIFAR-10 batch"):
        load_dataset("cifar10", data_dir=tmp_path)


# --- a dataset read from files declares what the loader needs: no dataset is known by its name ------


def test_a_users_dataset_declares_its_folders_format_and_normalisation(tmp_path, monkeypatch):
    """A KMNIST-like dataset of the user's: four IDX files in its own folder, its own normalisation
    and its own hint; loaded through the same code as the built-ins (and cached under its name)."""
    from wirelessfl.learning import FilesDataset, IdxFiles

    class Kuzushiji(FilesDataset):
        name, input_shape = "kmnist", (1, 28, 28)
        folders = ("kmnist", "k-mnist")
        files = IdxFiles()
        normalisation = ((0.5,), (0.25,))
        how_to_get = "download the four KMNIST IDX files from the ROIS-DS site"

    monkeypatch.setenv("WIRELESSFL_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DatasetNotFoundError) as err:
        Kuzushiji(str(tmp_path)).load()
    msg = str(err.value)
    assert msg.startswith("dataset 'kmnist' not found (need train-images-idx3-ubyte[.gz]") and "\n" not in msg
    assert f"looked in: {tmp_path / 'kmnist'}, {tmp_path / 'k-mnist'}, {tmp_path};" in msg
    assert msg.endswith("to get it: download the four KMNIST IDX files from the ROIS-DS site")
    arrays = write_mnist_folder(tmp_path / "k-mnist", np.random.default_rng(3))
    ds = Kuzushiji(str(tmp_path)).load()
    assert ds.name == "kmnist" and ds.num_classes == 10 and ds.input_shape == (1, 28, 28)
    expected = (arrays["train-images-idx3-ubyte"][:, None].astype(np.float32) / 255 - 0.5) / 0.25
    np.testing.assert_allclose(ds.x_train.numpy(), expected, rtol=1e-6, atol=1e-6)
    assert ds.y_test.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()
    assert [p.name.split("-")[0] for p in (tmp_path / "cache" / "datasets").iterdir()] == ["kmnist"]


def test_the_built_ins_declare_what_the_loader_needs():
    from wirelessfl.learning import DATASETS, CifarBatches, FilesDataset, IdxFiles

    declared = {name: DATASETS.load(name) for name in ("fashion_mnist", "mnist", "cifar10")}
    assert all(issubclass(part, FilesDataset) for part in declared.values())
    assert [type(part.files) for part in declared.values()] == [IdxFiles, IdxFiles, CifarBatches]
    assert [part.folders for part in declared.values()] == [("fashion-mnist", "fashion_mnist"), ("mnist",),
                                                             ("cifar10", "cifar-10")]
    assert [len(part.normalisation[0]) for part in declared.values()] == [1, 1, 3]  # one (mean, std) per channel
    assert not hasattr(DATASETS.load("synthetic"), "files")  # generated, not read from files
