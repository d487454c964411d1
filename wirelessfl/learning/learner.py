"""The training side of a run: the federated data, the trainer and the algorithm, behind the
engine's Learner protocol (train a round, train on the server, report losses, evaluate)."""
from __future__ import annotations

import numpy as np

from .. import rng as rngs
from ..capabilities import provides
from . import DatasetError, TrainingDiverged
from .algorithms import HearsTheUplink, Updates
from ..decisions import Decision, ReportRequest, Reports
from ..plugins import registry

__all__ = ["FederatedLearner", "TrainingDiverged", "data_shape", "federated_data", "model_bits_of"]


def model_bits_of(scenario) -> int:
    """Upload size in bits: the scenario's link.model_bits, else 32 x the parameter count of the
    scenario's model built for its dataset's input shape and classes (measured, see data_shape)."""
    if scenario.link.model_bits is not None:
        return scenario.link.model_bits
    from .models import count_parameters

    input_shape, num_classes = data_shape(scenario)
    counted = count_parameters(scenario.part("model"), input_shape, num_classes, scenario.options("model"))
    if scenario.part_name("model") not in registry("model").builtins:  # a plug-in's own count: held to its module
        _check_declared_count(scenario, counted, input_shape, num_classes)
    return 32 * counted


def _check_declared_count(scenario, declared: int, input_shape, num_classes: int) -> None:
    """A plug-in model's ``parameter_count`` against the module it builds (the built-ins count the very
    layer list they build): a timing-only run sizes its uploads by the count, a training run by the
    module, and the two must simulate the same uploads."""
    import torch

    from .models import build_model, model_kwargs, num_parameters

    part, options = scenario.part("model"), scenario.options("model")
    counted = getattr(part, "parameter_count", None)
    if counted is None or counted(tuple(input_shape), int(num_classes), **model_kwargs(options)) is None:
        return  # measured from the module already
    with torch.random.fork_rng(devices=[]):
        built = num_parameters(build_model(part, input_shape, num_classes, options=options))
    _check_count(scenario, declared, built)


def _check_count(scenario, declared: int, built: int) -> None:
    """One line when the model part's ``parameter_count`` is not the count of the module it builds."""
    from ..fields import ConfigError

    if int(declared) != built:
        raise ConfigError(f"learning.model = {scenario.part_name('model')!r}: parameter_count() says {int(declared):,} "
                          f"parameters and the module it builds has {built:,}; they must agree (a timing-only run "
                          "sizes its upload by the count)")


def data_shape(scenario) -> tuple[tuple[int, ...], int]:
    """(input_shape, num_classes) of the scenario's dataset: what the dataset part declares
    (``DatasetLoader.shape``), else read from its loaded data."""
    declared = scenario.part("dataset").shape(scenario, scenario.options("dataset"))
    if declared is not None:
        return declared
    data = _loaded(scenario)
    data = data.dataset if isinstance(data, tuple) else data
    return tuple(data.input_shape), int(data.num_classes)


def _loaded(scenario):
    """What the scenario's dataset part loads: a Dataset, or a DeviceSplit for a dataset with its own split."""
    from .datasets import Dataset
    from .loaders import DeviceSplit

    from .datasets import DatasetNotFoundError

    part = scenario.part("dataset")
    where = f"learning.dataset = {scenario.part_name('dataset')!r}"
    try:
        loaded = part.from_scenario(scenario, scenario.options("dataset")).load()
    except DatasetNotFoundError:
        raise  # a built-in's message already lists where it looked
    except FileNotFoundError as exc:  # a plugin's missing file: say which part wanted it
        raise DatasetNotFoundError(f"{where}: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")) from None
    if part.own_split:
        if not isinstance(loaded, tuple) or len(loaded) not in (2, 3) or not isinstance(loaded[0], Dataset):
            raise DatasetError(f"{where}: a dataset with its own split returns a DeviceSplit(dataset, "
                               f"train_indices), not a {type(loaded).__name__}")
        return DeviceSplit(*loaded)
    if not isinstance(loaded, Dataset):
        raise DatasetError(f"{where}: load() returned a {type(loaded).__name__}, not a Dataset (build one "
                           "with wirelessfl.learning.Dataset.from_arrays)")
    return loaded


def _index_lists(parts, num_devices: int, size: int, where: str) -> list[np.ndarray]:
    """The per-device index lists a part returned, checked: one per device, int indices in [0, size)."""
    need = f"one list of sample indices per device ({num_devices} lists)"
    if parts is None or isinstance(parts, (str, bytes, dict)) or not hasattr(parts, "__iter__"):
        raise DatasetError(f"{where}: returned {_kind(parts)}; it must return {need}")
    try:
        parts = list(parts)
    except Exception as exc:  # a generator that raises, ...
        raise DatasetError(f"{where}: its index lists cannot be read: {type(exc).__name__}: {exc}") from None
    if len(parts) != num_devices:
        raise DatasetError(f"{where}: gave {len(parts)} index lists for devices.count = {num_devices} devices")
    out = []
    for n, p in enumerate(parts):
        if p is None or isinstance(p, (str, bytes, dict)):
            raise DatasetError(f"{where}: device {n}'s index list is {_kind(p)}; it must return {need}")
        try:
            ix = np.asarray(p)
        except Exception as exc:  # ragged nested lists, ...
            raise DatasetError(f"{where}: device {n}'s index list cannot be read as integers: {exc}") from None
        if ix.ndim != 1 and ix.size:
            raise DatasetError(f"{where}: device {n}'s indices have shape {ix.shape}: one flat list each")
        if ix.size and (ix.dtype.kind not in "iu" or ix.min() < 0 or ix.max() >= size):
            raise DatasetError(f"{where}: device {n}'s indices must be integers in [0, {size}), one list each")
        out.append(ix.astype(np.int64).reshape(-1))
    return out


def _kind(value) -> str:
    """How a message names a value of the wrong kind."""
    return "None" if value is None else f"a {type(value).__name__}"


def _check_dataset(scenario, data) -> None:
    """What a dataset part of one's own loaded, at the seam: tensors of matching shapes, the input
    shape and classes it declares (``DatasetLoader.shape``), finite features and labels in range
    (the built-ins are pinned by their own tests)."""
    import torch

    name = scenario.part_name("dataset")
    if name in registry("dataset").builtins:
        return
    where = f"learning.dataset = {name!r}"
    tensors = {k: getattr(data, k, None) for k in ("x_train", "y_train", "x_test", "y_test")}
    for key, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise DatasetError(f"{where}: Dataset.{key} is {_kind(t)}, not a torch tensor (build the dataset with "
                               "wirelessfl.learning.Dataset.from_arrays)")
    shape = tuple(int(v) for v in data.input_shape)
    for split in ("train", "test"):
        x, y = tensors[f"x_{split}"], tensors[f"y_{split}"]
        if tuple(x.shape[1:]) != shape or x.shape[0] != y.reshape(-1).shape[0]:
            raise DatasetError(f"{where}: {split} features of shape {tuple(x.shape)} and {y.numel()} labels do not "
                               f"fit Dataset.input_shape = {shape}: one row of that shape per label")
        if x.is_floating_point() and not bool(torch.isfinite(x).all()):
            row = int(torch.nonzero(~torch.isfinite(x.reshape(x.shape[0], -1)).all(dim=1))[0])
            raise DatasetError(f"{where}: {split} sample {row} has a feature that is not finite (NaN or inf)")
        if y.numel() and (int(y.min()) < 0 or int(y.max()) >= int(data.num_classes)):
            raise DatasetError(f"{where}: {split} labels must lie in [0, {data.num_classes}) (Dataset.num_classes)")
    declared = scenario.part("dataset").shape(scenario, scenario.options("dataset"))
    if declared is not None and (tuple(declared[0]), int(declared[1])) != (shape, int(data.num_classes)):
        raise DatasetError(f"{where}: shape() declares inputs {tuple(declared[0])} and {declared[1]} classes, and "
                           f"load() gave inputs {shape} and {data.num_classes} classes; they must agree (the model and "
                           "the upload size are built from the declared shape)")


def federated_data(scenario):
    """(dataset, each device's training indices, the server's auxiliary indices) of the scenario:
    the dataset part's own split, or its training set split by the partition part."""
    data = _loaded(scenario)
    n = scenario.devices.count
    aux = np.empty(0, dtype=np.int64)
    _check_dataset(scenario, data.dataset if scenario.part("dataset").own_split else data)
    if scenario.part("dataset").own_split:  # e.g. Synthetic: generated per device
        where = f"learning.dataset = {scenario.part_name('dataset')!r}"
        return data.dataset, _index_lists(data.train_indices, n, len(data.dataset.y_train), where), aux
    lc = scenario.learning
    labels = data.y_train.numpy()
    pool = np.arange(labels.size)
    if lc.aux_samples:  # the server's set T: uniform from the training set, kept from the devices
        if lc.aux_samples >= labels.size:
            raise ValueError(f"learning.aux_samples = {lc.aux_samples}: must be below the "
                             f"{labels.size} training samples")
        aux = np.sort(rngs.stream(scenario.seed, "aux").choice(labels.size, lc.aux_samples, replace=False))
        pool = np.setdiff1d(pool, aux)
    partitioner = scenario.part("partition").from_scenario(scenario, scenario.options("partition"))
    parts = partitioner.split(labels[pool], n, rngs.stream(scenario.seed, "partition"),
                              num_classes=data.num_classes)
    parts = _index_lists(parts, n, pool.size, f"learning.partition = {scenario.part_name('partition')!r}")
    return data, [pool[p] for p in parts], aux


def _device_test_splits(scenario, data, parts: list[np.ndarray]) -> list[np.ndarray]:
    """Each device's own test split (indices into the test set): the partition's (Per-FedAvg's groups
    bring one, docs/papers/perfedavg.md, "Data: ten groups of devices"), else
    learning.device_test_samples samples with the class shares of the device's training data (the
    33/33/34 recipe of docs/papers/fair_selection.md, "Metrics", for three classes)."""
    from .fairness import device_test_sets

    lc = scenario.learning
    y_tr, y_te = data.y_train.numpy(), data.y_test.numpy()
    if not scenario.part("dataset").own_split:
        partitioner = scenario.part("partition").from_scenario(scenario, scenario.options("partition"))
        own = partitioner.test_split(y_tr, y_te, parts, rngs.stream(scenario.seed, "test_split"))
        if own is not None:
            where = f"learning.partition = {scenario.part_name('partition')!r}: test_split"
            return _index_lists(own, len(parts), y_te.size, where)
    return device_test_sets([y_tr[p] for p in parts], y_te, lc.device_test_samples,
                            rngs.stream(scenario.seed, "device_test"), data.num_classes)


def _check_model(scenario, trainer) -> None:
    """The model part's module, at the seam: logits of shape (batch, classes) for a batch of the
    dataset's inputs, and as many parameters as its ``parameter_count`` says (a timing-only run sizes
    its upload by that count). Computed in eval mode, under a fork of torch's RNG: nothing changes."""
    import torch
    from torch.func import functional_call

    from ..fields import ConfigError
    from .models import model_kwargs

    where = f"learning.model = {scenario.part_name('model')!r}"
    data, model = trainer.dataset, trainer.model
    x = data.x_train[:2].to(trainer.device)
    training = model.training
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            model.eval()
            out = functional_call(model, trainer.unflatten(trainer.params), (x,))
    except Exception as exc:  # a layer that does not fit the inputs
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise ConfigError(f"{where}: fails on a batch of the dataset's inputs of shape {tuple(x.shape)}: "
                          f"{type(exc).__name__}: {reason}") from None
    finally:
        model.train(training)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (x.shape[0], int(data.num_classes)):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else _kind(out)
        raise ConfigError(f"{where}: a batch of {x.shape[0]} inputs gave output {got}; it must give logits of shape "
                          f"(batch, num_classes) = ({x.shape[0]}, {data.num_classes})")
    counted = getattr(scenario.part("model"), "parameter_count", None)
    declared = counted(tuple(data.input_shape), int(data.num_classes), **model_kwargs(scenario.options("model"))) \
        if counted is not None else None
    if declared is not None:
        _check_count(scenario, declared, trainer.num_params)


def _first_nonfinite_row(state, num_devices: int) -> int | None:
    """The first device whose row of the per-device ``state`` is not finite (None: every row is), read
    in chunks of about ten million numbers."""
    step = max(1, 10_000_000 // max(int(state.width), 1))
    for first in range(0, num_devices, step):
        rows = state[np.arange(first, min(first + step, num_devices))]
        bad = ~rows.isfinite().all(dim=1)
        if bool(bad.any()):
            return first + int(np.flatnonzero(bad.cpu().numpy())[0])
    return None


class FederatedLearner:
    """Adapts the training core (trainer + algorithm) to the engine's Learner protocol.

    personalised: record personalised accuracy at every evaluation; fairness: record per-device
    accuracies and the client dissimilarity (the runner decides both from the scenario and parts).
    """

    compression: str | None = None
    """learning.compression when the updates are encoded (None: they are sent as computed)."""

    def __init__(self, scenario, algorithm, *, personalised: bool = False, fairness: bool = False,
                 run_dir=None, compressor=None):
        from .compression import Uplink, sends_floats
        from .trainer import Trainer

        lc = scenario.learning
        data, parts, aux = federated_data(scenario)
        self.personalised = personalised
        # the label-matched device test sets need a shared training set
        self.fairness = fairness and not scenario.part("dataset").own_split
        # each device's own test split, for personalised evaluation and the fairness metrics
        self.test_parts = (_device_test_splits(scenario, data, parts)
                           if self.personalised or self.fairness else None)
        self.trainer = Trainer(data, parts, scenario.part("model"), local_steps=lc.local_steps,
                               batch_size=lc.batch_size, lr=lc.lr, root_seed=scenario.seed,
                               device=scenario.run.device, eval_train_samples=lc.eval_train_samples,
                               batching=scenario.run.batching, server_indices=aux,
                               model_options=scenario.options("model"))
        _check_model(scenario, self.trainer)
        if run_dir is not None:  # per-device states keep their journals (and large arrays) there
            self.trainer.device_states.use_run_folder(run_dir)
        self.compression = None if compressor is None or sends_floats(compressor) else scenario.learning.compression
        if self.compression is not None:
            self.trainer.uplink = Uplink(compressor, scenario.seed, self.trainer.device_state)
        self.algorithm = algorithm
        self.scenario_learning, self.algorithm_name = lc, scenario.learning.algorithm
        algorithm.setup(self.trainer)
        self.per_alpha, self.per_adapt_on = lc.per_alpha, lc.per_adapt_on
        self.num_devices = scenario.devices.count

    @property
    def model_bits(self) -> int:
        """32 x the model's parameters."""
        return self.trainer.model_bits

    def uplink(self, facts) -> None:
        """What the uplink did for the coming aggregation: its noise goes to the trainer's next
        aggregate, the facts to an algorithm that HearsTheUplink."""
        self.trainer.aggregate_noise_var = float(facts.noise_var)
        if provides(self.algorithm, HearsTheUplink):
            self.algorithm.uplink(facts)

    def train_round(self, selected: np.ndarray, decision: Decision, round_idx: int) -> dict:
        """The algorithm's client round on the devices whose uploads arrived; its numbers."""
        sent = self._sent()
        metrics = self.algorithm.round(self.trainer, selected, decision.q, self.num_devices, round_idx)
        self._check_sent(sent, len(selected))
        self._check_finite(f"round {round_idx}")
        return dict(metrics or {})

    def _sent(self) -> int:
        return self.trainer.vectors_sent if self.compression is not None else 0

    def _check_sent(self, before: int, devices: int) -> None:
        """With compression, the devices' updates must have gone through ``Trainer.upload``: an
        algorithm that made them some other way would send 32-bit floats on an airtime of fewer bits."""
        if self.compression is not None and devices and self.trainer.vectors_sent == before:
            raise ValueError(f"learning.compression = {self.compression!r}: learning.algorithm = "
                             f"{self.algorithm_name!r} made its devices' updates without trainer.local_updates or "
                             "trainer.upload, so none was compressed (see docs/compression.md)")

    @property
    def params(self):
        """The global model (a tensor replaced, not changed in place, at every aggregation)."""
        return self.trainer.params

    @params.setter
    def params(self, value) -> None:
        """Put another model in its place (an edge server's, the cloud's average)."""
        self.trainer.params = value

    def sample_counts(self) -> np.ndarray:
        """Each device's training samples |D_n| (the cloud weighs an edge by its devices' sum)."""
        return np.array([len(ix) for ix in self.trainer._indices], dtype=np.int64)

    def local_updates(self, devices: np.ndarray, key: int, start=None):
        """Event protocols: the devices' deltas from the current model (or from ``start``, an older
        one the devices last received) by the algorithm's local rule (minibatches keyed by ``key``),
        a (k, d) tensor; the model does not change."""
        sent = self._sent()
        current = self.trainer.params
        if start is not None:  # the algorithm trains from trainer.params: the older model for this call
            self.trainer.params = start
        try:
            deltas = self.algorithm.local_updates(self.trainer, np.asarray(devices, dtype=np.int64), key)
        finally:
            self.trainer.params = current
        self._check_sent(sent, len(devices))
        return deltas

    def apply_updates(self, devices: np.ndarray, deltas: list, weights: np.ndarray, staleness: np.ndarray,
                      starts: list | None = None) -> dict:
        """Event protocols: one aggregation of (possibly stale) updates by the algorithm. With
        ``starts`` (fedasync's mix), each update moves the model toward the device's model
        start + delta: the algorithm gets y - x instead of the delta."""
        import torch

        stacked = torch.stack(deltas)
        if starts is not None:
            stacked = torch.stack(starts) + stacked - self.trainer.params
        metrics = self.algorithm.apply_updates(self.trainer, Updates(np.asarray(devices, dtype=np.int64), stacked,
                                                                     np.asarray(weights, dtype=float),
                                                                     np.asarray(staleness)))
        self._check_finite("an aggregation")
        return dict(metrics or {})

    def server_round(self, round_idx: int) -> dict:
        """The algorithm's server round; its numbers. The engines open one only when the algorithm's
        ``plan_round`` asks for it, so the algorithm has ServerRounds."""
        metrics = self.algorithm.server_round(self.trainer, round_idx)
        self._check_finite(f"server round {round_idx}", server=True)
        return dict(metrics or {})

    def _check_finite(self, where: str, server: bool = False) -> None:
        """TrainingDiverged, saying where the first value that was not finite appeared, when the model
        is no longer finite."""
        import torch

        if not bool(torch.isfinite(self.trainer.params).all()):
            raise TrainingDiverged(f"training diverged in {where}: the model is no longer finite: {self._cause(server)}")

    def _cause(self, server: bool) -> str:
        """Where a divergence began: a device's state that is not finite, local updates that were not
        (the step size), or an aggregation of finite updates (the algorithm or its options)."""
        states = self.trainer.device_states.states
        for name, state in states.items():
            n = _first_nonfinite_row(state, self.num_devices)
            if n is not None:
                return (f"device {n}'s state {name!r} is not finite (a per-device state the algorithm keeps; "
                        "restored from a damaged device_state journal?)")
        lc, algorithm = self.scenario_learning, self.algorithm_name
        if server:
            return ("the server's own training steps were not finite; try a smaller server step size "
                    "(learning.server_lr)")
        if self.trainer.nonfinite_local is not None:
            device, round_idx = self.trainer.nonfinite_local
            return (f"the local update of device {device} (round {round_idx}) was the first value that was not "
                    f"finite; try a smaller learning.lr (now {lc.lr:g}) or fewer learning.local_steps "
                    f"(now {lc.local_steps})")
        overflowed = getattr(self.trainer.uplink, "overflowed", None)
        if overflowed is not None:
            device, round_idx = overflowed
            return (f"the local update of device {device} (round {round_idx}) was finite and too large for "
                    f"learning.compression = {self.compression!r} to encode (it decoded to inf); try a smaller "
                    f"learning.lr (now {lc.lr:g}) or fewer learning.local_steps (now {lc.local_steps})")
        return (f"the local updates were finite and the aggregation of learning.algorithm = {algorithm!r} made "
                "the model non-finite; check the algorithm's options (a server step size, Flower's eta, ...)")

    def reports(self, request: ReportRequest, round_idx: int) -> Reports:
        """The requested devices' losses (and gradients) at the current global model."""
        devices = np.asarray(request.devices, dtype=np.int64)
        grads, losses = self.trainer.local_objectives(devices, request.gradients, max_samples=request.max_samples)
        return Reports(round=round_idx, devices=devices, losses=losses, gradients=grads)

    def label_coverage(self, devices: np.ndarray) -> float:
        """Share of the classes held by at least one of the given devices (a boolean mask)."""
        y = self.trainer.dataset.y_train.numpy()
        held = [ix for ix, on in zip(self.trainer._indices, devices) if on and ix.size]
        seen = np.unique(y[np.concatenate(held)]) if held else np.empty(0)
        return float(seen.size / self.trainer.dataset.num_classes)

    def state_dict(self) -> dict:
        """The global model, how many aggregations made it and the per-device states (by reference to
        their journals; the algorithm's own state is saved by the runner)."""
        return {"params": self.trainer.params.clone(), "aggregations": self.trainer.aggregations,
                "device_states": self.trainer.device_states.checkpoint()}

    def load_state(self, state: dict) -> None:
        """Restore the global model and the per-device states; a model that is not finite is refused
        (the run would diverge at once, blaming what did not cause it)."""
        import torch

        from ..files import DamagedFile

        params = torch.as_tensor(state["params"])
        if not bool(torch.isfinite(params).all()):
            raise DamagedFile("checkpoint.pt: the model in it is not finite (the checkpoint is damaged)")
        self.trainer.params = params
        self.trainer.aggregations = int(state.get("aggregations", 0))
        self.trainer.device_states.restore(state.get("device_states", {}))
        for name, kept in self.trainer.device_states.states.items():
            n = _first_nonfinite_row(kept, self.num_devices)
            if n is not None:
                raise DamagedFile(f"device_state/{name}: device {n}'s row is not finite after its journal was "
                                  "replayed (the journal is damaged)")

    def evaluate(self) -> dict:
        """Test accuracy and losses, plus personalised and fairness metrics where they are on."""
        metrics = self.trainer.evaluate()
        if self.personalised:
            pers = self.trainer.personalised_evaluate(self.test_parts, self.per_alpha, adapt_on=self.per_adapt_on)
            per_device = pers.pop("personal_per_device")
            metrics.update(pers, personal_per_device=" ".join(f"{a:.4g}" for a in per_device))
        if self.fairness:
            from .fairness import fairness_metrics

            sizes = [t.size for t in self.test_parts]
            correct = self.trainer.test_correct(np.concatenate(self.test_parts))
            acc = [c.mean() if c.size else np.nan for c in np.split(correct, np.cumsum(sizes)[:-1])]
            metrics.update(fairness_metrics(np.asarray(acc)))
        return metrics
