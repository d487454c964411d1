"""Split a training set over devices: each device gets an array of indices into the training set."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["CLASS_ASSIGNMENTS", "by_class", "check_split_inputs", "classes_per_device_partition",
           "device_sizes", "dirichlet_per_device", "iid_split", "label_dirichlet", "partition",
           "perfedavg_group_counts", "perfedavg_groups", "perfedavg_test_unit", "split_by_class_counts"]

CLASS_ASSIGNMENTS = ("random", "ordered")


def partition(
    labels: np.ndarray,
    num_devices: int,
    scheme: str,
    *,
    rng: np.random.Generator,
    samples_per_device: int = 500,
    alpha: float = 1.0,
    num_classes: int | None = None,
    size_sigma: float = 0.0,
    classes_per_device: int = 2,
    class_assignment: str = "random",
) -> list[np.ndarray]:
    """Return ``num_devices`` sorted int64 index arrays into the training set, split by the built-in
    partition ``scheme`` (wirelessfl.learning.PARTITIONS; see wirelessfl.learning.partitioners for
    what each does) with the settings a scenario's learning table gives it.

    ``rng`` should be the scenario's "partition" stream. ``num_classes`` defaults to max label + 1.
    """
    from ..plugins import registry  # the kind's registry, looked up by name: no import cycle

    builtins = registry("partition").builtins
    if scheme not in builtins:
        raise ValueError(f"unknown partition scheme {scheme!r}; allowed: {', '.join(builtins)}")
    partitioner = registry("partition").load(scheme)(samples_per_device=samples_per_device, alpha=alpha,
                                          size_sigma=size_sigma, classes_per_device=classes_per_device,
                                          class_assignment=class_assignment)
    return partitioner.split(labels, num_devices, rng, num_classes=num_classes)


def check_split_inputs(labels: np.ndarray, num_devices: int, samples_per_device: int = 1, size_sigma: float = 0.0,
                       alpha: float = 0.0) -> np.ndarray:
    """``labels`` as an array, after the checks every built-in split makes (ValueError naming the value)."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
    if num_devices < 1:
        raise ValueError(f"num_devices must be >= 1, got {num_devices}")
    if samples_per_device < 1:
        raise ValueError(f"samples_per_device must be >= 1, got {samples_per_device}")
    if not size_sigma >= 0:
        raise ValueError(f"size_sigma must be >= 0, got {size_sigma}")
    if not alpha >= 0:  # also rejects NaN
        raise ValueError(f"alpha must be >= 0 (0: one class, inf: iid), got {alpha}")
    return labels


def by_class(labels: np.ndarray, num_classes: int) -> list[np.ndarray]:
    """The indices of each class's samples, classes 0 .. num_classes - 1."""
    return [np.flatnonzero(labels == k) for k in range(num_classes)]


def dirichlet_per_device(labels: np.ndarray, num_devices: int, samples_per_device: int, alpha: float,
                         rng: np.random.Generator, num_classes: int, size_sigma: float = 0.0) -> list[np.ndarray]:
    """The Lyapunov paper's split (docs/papers/lyapunov.md, "The experiments"): for each device a class
    mix c ~ Dir(alpha * 1), then ``samples_per_device`` class draws from c and, for each draw, a
    uniformly random training sample of that class. alpha = 0: one random class per device; inf: iid.
    Devices draw independently, so a sample may sit on several devices; within one device the samples
    of a class are distinct (drawn with replacement only if the class has fewer than the device needs).
    ``size_sigma`` > 0: unequal sizes (:func:`device_sizes`, drawn first)."""
    sizes = device_sizes(num_devices, samples_per_device, size_sigma, rng) if size_sigma > 0 else None
    return _dirichlet_per_device(by_class(labels, num_classes), num_devices, samples_per_device, alpha, rng, sizes)


def label_dirichlet(labels: np.ndarray, num_devices: int, alpha: float, rng: np.random.Generator,
                    num_classes: int) -> list[np.ndarray]:
    """The common benchmark split: the samples of each class are shuffled and cut over the devices in
    proportions ~ Dir(alpha * 1); every sample goes to exactly one device. alpha = 0: each class goes
    whole to one random device; inf: equal proportions. A device may end up with no data at small alpha."""
    return _label_dirichlet(by_class(labels, num_classes), num_devices, alpha, rng)


def iid_split(n: int, num_devices: int, samples_per_device: int, rng: np.random.Generator,
              size_sigma: float = 0.0) -> list[np.ndarray]:
    """A random disjoint split of ``n`` samples, ``samples_per_device`` each if the set is large
    enough, otherwise the whole set cut into near-equal parts (``size_sigma`` > 0: unequal sizes)."""
    sizes = device_sizes(num_devices, samples_per_device, size_sigma, rng) if size_sigma > 0 else None
    return _iid(n, num_devices, samples_per_device, rng, sizes)


def perfedavg_groups(labels: np.ndarray, num_devices: int, samples_per_device: int, rng: np.random.Generator,
                     num_classes: int, single_class: bool = False) -> list[np.ndarray]:
    """Per-FedAvg's Table 2 layout (docs/papers/perfedavg.md, "Data: ten groups of devices"): the class
    counts of :func:`perfedavg_group_counts` with a = ``samples_per_device`` / 5, drawn disjointly
    without replacement; ``single_class``: its "diff. hetero." variant."""
    if samples_per_device % 10:
        variant = "perfedavg_groups_single" if single_class else "perfedavg_groups"
        raise ValueError(f"samples_per_device = {samples_per_device}: {variant} needs a multiple of 10 (5a, a even)")
    counts = perfedavg_group_counts(num_devices, samples_per_device // 5, single_class=single_class,
                                    num_classes=num_classes)
    return split_by_class_counts(labels, counts, rng)


def classes_per_device_partition(labels: np.ndarray, num_devices: int, classes_per_device: int,
                                 rng: np.random.Generator, num_classes: int = 10,
                                 assignment: str = "random") -> list[np.ndarray]:
    """The balanced p-classes-per-device split (docs/papers/safari.md, "The non-iid index p"); indices
    into ``labels``.

    Each of the N devices gets p = ``classes_per_device`` distinct classes and each class is held
    by exactly p N / num_classes devices (p N must be a multiple of num_classes). A class's samples
    are shuffled and cut into near-equal disjoint chunks, one per holder, so devices hold about
    |labels| / N samples each.

    ``assignment`` "random" (the paper's "each client randomly selects p classes"): a uniformly random
    assignment of the class slots with no class twice on a device (rejection sampling; if that keeps
    failing, which happens at large p, the slots of randomly ordered classes are dealt round-robin).
    "ordered": the classes are dealt round-robin in label order, so device n holds classes
    floor(n num_classes / (p N)) + j num_classes / p for j < p, e.g. device n holds class n // 2 for
    p = 1 and N = 20. It ties classes to device ids, so that a per-device profile (a channel that
    worsens with the id) meets particular classes; only the samples' split is random.
    ``rng`` should be the scenario's "partition" stream.
    """
    p, n_dev, k = int(classes_per_device), int(num_devices), int(num_classes)
    if assignment not in CLASS_ASSIGNMENTS:
        raise ValueError(f"unknown class assignment {assignment!r}; allowed: {', '.join(CLASS_ASSIGNMENTS)}")
    if not 1 <= p <= k or (p * n_dev) % k:
        raise ValueError(f"classes_per_device = {p} with {n_dev} devices: need 1 <= p <= {k} and "
                         f"p x devices a multiple of {k}")
    holders_per_class = p * n_dev // k
    if assignment == "ordered":
        # a class fills p N / k <= N consecutive slots of a row of N, so no device gets it twice
        table = np.repeat(np.arange(k), holders_per_class).reshape(p, n_dev).T
    else:
        slots = np.repeat(np.arange(k), holders_per_class)
        for _ in range(1000):
            table = rng.permutation(slots).reshape(n_dev, p)
            if all(len(set(row)) == p for row in table):
                break
        else:
            table = np.repeat(rng.permutation(k), holders_per_class).reshape(p, n_dev).T[rng.permutation(n_dev)]
    parts: list[list[np.ndarray]] = [[] for _ in range(n_dev)]
    for c in range(k):
        who = np.flatnonzero((table == c).any(axis=1))
        idx = rng.permutation(np.flatnonzero(labels == c))
        for dev, chunk in zip(who, np.array_split(idx, who.size)):
            parts[dev].append(chunk)
    return [np.sort(np.concatenate(ch)).astype(np.int64) for ch in parts]


def device_sizes(num_devices: int, samples_per_device: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Unequal dataset sizes: round(samples_per_device x exp(sigma z - sigma^2/2)), z ~ N(0, 1), at least 1.

    The log-normal factor has mean 1, so the mean size is about ``samples_per_device``; sigma = 1
    gives a largest-to-smallest ratio of about 30 over 100 devices.
    """
    z = rng.standard_normal(num_devices)
    return np.maximum(np.rint(samples_per_device * np.exp(sigma * z - sigma ** 2 / 2)), 1).astype(np.int64)


def _class_mix(num_classes: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """One probability vector over ``num_classes`` ~ Dir(alpha·1), with the limits alpha=0 and inf."""
    if alpha == 0:
        c = np.zeros(num_classes)
        c[rng.integers(num_classes)] = 1.0
        return c
    if math.isinf(alpha):
        return np.full(num_classes, 1.0 / num_classes)
    return rng.dirichlet(np.full(num_classes, alpha))


def _dirichlet_per_device(by_class, num_devices, samples_per_device, alpha, rng, sizes=None) -> list[np.ndarray]:
    num_classes = len(by_class)
    present = np.array([idx.size > 0 for idx in by_class])
    out = []
    for dev in range(num_devices):
        c = _class_mix(num_classes, alpha, rng)
        if not np.all(present):  # a class absent from the training set cannot be drawn
            c = np.where(present, c, 0.0)
            c = c / c.sum() if c.sum() > 0 else present / present.sum()
        size = samples_per_device if sizes is None else int(sizes[dev])
        counts = rng.multinomial(size, c)  # = size categorical draws
        parts = []
        for k in np.flatnonzero(counts):
            pool = by_class[k]
            parts.append(rng.choice(pool, size=counts[k], replace=counts[k] > pool.size))
        out.append(np.sort(np.concatenate(parts)).astype(np.int64))
    return out


def _label_dirichlet(by_class, num_devices, alpha, rng) -> list[np.ndarray]:
    shares: list[list[np.ndarray]] = [[] for _ in range(num_devices)]
    for idx in by_class:
        if idx.size == 0:
            continue
        idx = rng.permutation(idx)
        p = _class_mix(num_devices, alpha, rng)
        cuts = np.round(np.cumsum(p)[:-1] * idx.size).astype(np.int64)
        for dev, piece in enumerate(np.split(idx, cuts)):
            shares[dev].append(piece)
    return [np.sort(np.concatenate(s)).astype(np.int64) if s else np.empty(0, np.int64) for s in shares]


def _iid(n: int, num_devices, samples_per_device, rng, sizes=None) -> list[np.ndarray]:
    perm = rng.permutation(n)
    if sizes is not None:  # unequal sizes, scaled down together if the set is too small
        if sizes.sum() > n:
            sizes = np.maximum(np.floor(sizes * (n / sizes.sum())), 1).astype(np.int64)
            while sizes.sum() > n:  # the floor of 1 can still overshoot when n is tiny
                sizes[np.argmax(sizes)] -= 1
        return [np.sort(c).astype(np.int64) for c in np.split(perm[: sizes.sum()], np.cumsum(sizes)[:-1])]
    if num_devices * samples_per_device <= n:
        chunks = perm[: num_devices * samples_per_device].reshape(num_devices, samples_per_device)
    else:
        chunks = np.array_split(perm, num_devices)
    return [np.sort(c).astype(np.int64) for c in chunks]


def perfedavg_group_counts(num_devices: int, a: int, *, single_class: bool = False,
                           num_classes: int = 10) -> np.ndarray:
    """Per-FedAvg's heterogeneous layout (its Table 2): samples of each class per device, shape (n, 10).

    The devices form 10 equal groups of num_devices / 10 consecutive devices. Groups 1-5 (the first
    half, "type A") hold a samples of each of classes 0-4. Group 5 + j (j = 1..5) holds a/2 samples of
    class j-1 and 2a of class j+4. ``single_class`` ("diff. hetero."): type-B devices hold only their
    2a samples of class j+4.
    """
    if num_devices % 10 or num_devices < 10:
        raise ValueError(f"num_devices = {num_devices}: must be a positive multiple of 10 (10 equal groups)")
    if a < 2 or a % 2:
        raise ValueError(f"a = {a}: must be an even integer >= 2 (type-B devices hold a/2 of one class)")
    if num_classes != 10:
        raise ValueError(f"the Per-FedAvg layout needs 10 classes, got {num_classes}")
    per_group = num_devices // 10
    counts = np.zeros((num_devices, 10), dtype=np.int64)
    counts[: 5 * per_group, :5] = a
    for j in range(5):
        rows = slice((5 + j) * per_group, (6 + j) * per_group)
        counts[rows, j] = 0 if single_class else a // 2
        counts[rows, j + 5] = 2 * a
    return counts


def perfedavg_test_unit(a: int, num_train: int, num_test: int) -> int:
    """The test split's a: a x num_test / num_train rounded to an even number (docs/papers/perfedavg.md,
    "Where the simulator departs from the paper": 32 for MNIST)."""
    return max(2, 2 * int(round(a * num_test / num_train / 2)))


def split_by_class_counts(labels: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """Disjoint index sets: device n gets ``counts[n, k]`` distinct samples of class k, without replacement.

    Raises ValueError when a class has fewer samples than all devices together need.
    """
    labels = np.asarray(labels)
    counts = np.asarray(counts, dtype=np.int64)
    parts: list[list[np.ndarray]] = [[] for _ in range(counts.shape[0])]
    for k in range(counts.shape[1]):
        need = counts[:, k]
        if not need.sum():
            continue
        pool = rng.permutation(np.flatnonzero(labels == k))
        if need.sum() > pool.size:
            raise ValueError(f"class {k}: the devices need {need.sum()} samples, the set has {pool.size}")
        for n, piece in enumerate(np.split(pool[: need.sum()], np.cumsum(need)[:-1])):
            parts[n].append(piece)
    return [np.sort(np.concatenate(p)).astype(np.int64) if p else np.empty(0, np.int64) for p in parts]
