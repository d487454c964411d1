"""Flower strategies as algorithms: ``learning.algorithm = "flwr.server.strategy:FedAdam"``.

Any class that subclasses Flower's ``Strategy`` runs unchanged under the wireless model: its
constructor arguments come from ``[learning.options]``, its ``initialize_parameters`` gives the
first model (it receives the simulator's initial model as ``initial_parameters`` when its
constructor takes one and the scenario does not), and each round its ``aggregate_fit`` receives a
``FitRes`` per device whose upload arrived (the device's model after local training, as one flat
float32 array, and its number of training samples) and returns the next model.

What a round means here: the scenario's scheduler chooses the devices, so ``configure_fit``'s
client sampling (``fraction_fit``, ``min_fit_clients``, ``min_available_clients``) is not used; the
config it returns for the round is honoured where it names a local setting of the simulator:
``lr`` (or ``learning_rate``), ``local_steps``, ``local_epochs`` (epochs over the device's data in
minibatches of ``learning.batch_size``) and ``proximal_mu`` (FedProx's proximal term). Other keys are
ignored. ``configure_evaluate`` and ``aggregate_evaluate`` are not called: the simulator evaluates the
global model itself. A run says this in one line when it starts. Unless the scenario gives them, a
strategy's ``evaluate_fn`` reports the simulator's training loss (QFedAvg weighs by it) and its
``fit_metrics_aggregation_fn`` returns no metrics (devices report none).

Flower is an optional extra (``pip install -e ".[flower]"``); this module imports it only when a
scenario names a Flower strategy. Strategies that need Flower's client-side machinery are refused.
"""
from __future__ import annotations

import functools
import inspect
import math
import sys
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..fields import ConfigError
from ..plugins import PluginError
from . import TrainingDiverged
from .algorithms import Algorithm

if TYPE_CHECKING:
    from .trainer import Trainer

__all__ = ["CLIENT_SIDE", "FlowerStrategy", "adapt_strategy", "is_flower_strategy"]

CLIENT_SIDE = {
    "DifferentialPrivacyClientSideFixedClipping": "its clipping runs on Flower's clients (a client mod)",
    "DifferentialPrivacyClientSideAdaptiveClipping": "its clipping runs on Flower's clients (a client mod)",
    "DPFedAvgFixed": "its clients clip and report their norms through Flower's client wrapper",
    "DPFedAvgAdaptive": "its clients clip and report their norms through Flower's client wrapper",
    "FedXgbBagging": "its clients send XGBoost trees as bytes, not model arrays",
    "FedXgbCyclic": "its clients send XGBoost trees as bytes, not model arrays",
    "FedXgbNnAvg": "its clients send XGBoost trees beside the model",
    "FedAvgAndroid": "its clients exchange parameters in the Android client's byte format",
}
"""Flower strategies that cannot run without Flower's clients, and why."""

HONOURED_CONFIG = ("lr", "learning_rate", "local_steps", "local_epochs", "proximal_mu")
"""The keys of configure_fit's per-round config that set something here."""


def is_flower_strategy(cls) -> bool:
    """Whether ``cls`` subclasses Flower's Strategy (told from its bases' modules: Flower need not be
    imported to ask)."""
    return isinstance(cls, type) and any(
        base.__name__ == "Strategy" and base.__module__.split(".")[0] == "flwr" for base in cls.__mro__)


def adapt_strategy(cls, where: str):
    """The algorithm class that runs the Flower strategy ``cls``; ``cls`` itself when it is not one."""
    if not is_flower_strategy(cls):
        return cls
    if cls.__name__ in CLIENT_SIDE:
        raise PluginError(f"{where}: {cls.__name__} needs Flower's client-side machinery ({CLIENT_SIDE[cls.__name__]}); "
                          "the simulator runs a strategy's server side only")
    if inspect.isabstract(cls):
        raise PluginError(f"{where}: {cls.__name__} is abstract (it lacks "
                          f"{', '.join(sorted(cls.__abstractmethods__))}); name a strategy that implements them")
    return type(f"Flower{cls.__name__}", (FlowerStrategy,),
                {"strategy_class": cls, "__module__": __name__, "__doc__": f"Flower's {cls.__name__}, run by "
                 "wirelessfl (see wirelessfl.learning.flower)."})


class FlowerStrategy(Algorithm):
    """A Flower strategy's server side, run as an algorithm (see the module docstring)."""

    strategy_class: ClassVar[type]
    Options = None  # the strategy's constructor arguments, as a dict
    seed = 0  # the scenario's: seeds the strategy's random stream
    _numpy_random = None  # the state of that stream (numpy's legacy state tuple), once used

    def __init__(self, arguments: dict):
        self.arguments = dict(arguments)
        self.strategy = None
        self._said_ignored: set[str] = set()

    @classmethod
    def from_scenario(cls, scenario, options) -> "FlowerStrategy":
        """The strategy's constructor arguments from [learning.options]; it is built at setup, when
        the initial model exists."""
        algorithm = cls(dict(options))
        algorithm.seed = int(scenario.seed)
        return algorithm

    @classmethod
    def check(cls, scenario, options) -> None:
        """The arguments fit the constructor, and the strategy can be built with them; no over-the-air
        uplink (a strategy aggregates updates one by one)."""
        name, arguments = cls.strategy_class.__name__, dict(options)
        parameters = inspect.signature(cls.strategy_class.__init__).parameters
        takes = [p for p in list(parameters)[1:] if parameters[p].kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                                                 inspect.Parameter.VAR_KEYWORD)]
        for key, value in arguments.items():
            if key not in takes and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
                raise ConfigError(f"learning.options.{key}: {name} takes no argument {key!r}; "
                                  f"its arguments: {', '.join(takes)}")
            default = parameters[key].default if key in parameters else None
            kind = _kind_of(default)
            if kind is not None and _kind_of(value) not in (kind, *(("int",) if kind == "float" else ())):
                raise ConfigError(f"learning.options.{key} = {value!r}: {name} takes a {kind} here "
                                  f"(its default is {default!r})")
        try:
            cls._build(arguments)
        except ConfigError:
            raise
        except Exception as exc:  # whatever the strategy's constructor refuses
            raise ConfigError(f"learning.options: {name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())}) "
                              f"fails: {type(exc).__name__}: {exc}".replace("\n", " ")) from None
        if scenario.facts.over_the_air:
            raise ConfigError(f"learning.algorithm: {name} aggregates the devices' models one by one, and "
                              f"link.access = {scenario.link.access!r} delivers only their sum; use another access scheme")

    @classmethod
    def _build(cls, arguments: dict, trainer: "Trainer | None" = None):
        """The strategy, with the arguments a scenario cannot give filled in where its constructor
        takes them: ``initial_parameters`` (the simulator's initial model), ``evaluate_fn`` (the
        training loss on the evaluation subset, which QFedAvg asks for) and
        ``fit_metrics_aggregation_fn`` (devices report no metrics: an empty dict)."""
        from flwr.common import ndarrays_to_parameters

        takes = inspect.signature(cls.strategy_class.__init__).parameters
        filled = {"initial_parameters": lambda: ndarrays_to_parameters(
                      [trainer.params.cpu().numpy() if trainer is not None else np.zeros(1, np.float32)]),
                  "evaluate_fn": lambda: functools.partial(_training_loss, trainer),
                  "fit_metrics_aggregation_fn": lambda: _no_metrics}
        arguments = {**{k: make() for k, make in filled.items() if k in takes and k not in arguments}, **arguments}
        missing = [p.name for p in list(takes.values())[1:]
                   if p.default is inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_KEYWORD
                   and p.kind is not inspect.Parameter.VAR_POSITIONAL and p.name not in arguments]
        if missing:
            raise ConfigError(f"learning.options: {cls.strategy_class.__name__} needs {', '.join(missing)}: set "
                              "numbers and strings in [learning.options]; an object or a function (another "
                              "strategy, a callback) needs a subclass in your own file that passes it")
        return cls.strategy_class(**arguments)

    def setup(self, trainer: "Trainer") -> None:
        """Build the strategy with the trainer's initial model; its initialize_parameters, if it gives
        any, becomes the global model."""
        from flwr.common import parameters_to_ndarrays

        self.strategy = self._build(self.arguments, trainer)
        self._own_numpy_random()
        first = self.strategy.initialize_parameters(client_manager=_Devices([]))
        if first is not None:
            trainer.params = _flat(parameters_to_ndarrays(first), trainer.num_params)
        print(f"wirelessfl: Flower's {self.strategy_class.__name__}: the scheduler chooses the devices "
              f"(configure_fit's sampling is not used); its fit config's {', '.join(HONOURED_CONFIG)} apply; "
              "configure_evaluate and aggregate_evaluate are not called (the simulator evaluates)", file=sys.stderr)

    def round(self, trainer: "Trainer", selected: np.ndarray, q: np.ndarray, num_devices: int,
              round_idx: int) -> dict[str, Any]:
        """Local training by the round's fit config, then the strategy's aggregate_fit."""
        from flwr.common import Code, FitRes, Status, ndarrays_to_parameters, parameters_to_ndarrays

        devices = np.unique(np.asarray(selected, dtype=np.int64))
        if devices.size == 0:
            return {"num_trained": 0}
        server_round = round_idx + 1  # Flower counts rounds from 1
        proxies = [_device_class()(str(n)) for n in devices]
        x = trainer.params
        config = self._fit_config(server_round, x, proxies)
        models = x + self._local_updates(trainer, devices, round_idx, config)
        ok = Status(code=Code.OK, message="")
        results = [(proxy, FitRes(status=ok, parameters=ndarrays_to_parameters([model.cpu().numpy()]),
                                  num_examples=int(trainer.data_sizes[n]), metrics={}))
                   for proxy, n, model in zip(proxies, devices, models)]
        aggregated = self._aggregated(self.strategy.aggregate_fit(server_round, results, []), server_round, trainer)
        if aggregated is not None:  # None: the strategy keeps the model (Flower's convention)
            new = aggregated.to(x.device)
            trainer.aggregate((new - x)[None], [1.0])
        return {"num_trained": int(devices.size)}

    def _aggregated(self, returned, server_round: int, trainer: "Trainer"):
        """aggregate_fit's return, checked at the seam: a pair (Parameters or None, metrics dict) whose
        parameters are the model's size and finite (from finite updates: otherwise the strategy's own
        arithmetic, e.g. FedAdam's eta, made them so). The flat model, or None."""
        from flwr.common import Parameters, parameters_to_ndarrays

        from ..plugins import PartError

        where = f"learning.algorithm = {self.strategy_class.__name__}: aggregate_fit (round {server_round})"
        if not isinstance(returned, tuple) or len(returned) != 2:
            raise PartError(f"{where} returned {_shown(returned)}; Flower's contract is a pair "
                            "(Parameters or None, dict of metrics)")
        aggregated = returned[0]
        if aggregated is None:
            return None
        if not isinstance(aggregated, Parameters):
            raise PartError(f"{where} returned {_shown(aggregated)} as the parameters; Flower's contract is a "
                            "Parameters (flwr.common.ndarrays_to_parameters) or None")
        try:
            arrays = parameters_to_ndarrays(aggregated)
            flat = _flat(arrays, trainer.num_params)
        except Exception as exc:  # bytes that are not NumPy arrays, a wrong size
            raise PartError(f"{where}: its parameters cannot be read as the model's: {exc}") from None
        if not bool(flat.isfinite().all()) and trainer.nonfinite_local is None:
            raise TrainingDiverged(f"training diverged in round {server_round - 1}: the model is no longer finite: "
                                   f"{self.strategy_class.__name__}.aggregate_fit returned parameters that are not "
                                   "finite from finite local models; check the strategy's options in "
                                   "[learning.options] (a server step size such as eta)")
        return flat

    def _fit_config(self, server_round: int, x, proxies: list) -> dict:
        from flwr.common import ndarrays_to_parameters

        pairs = self.strategy.configure_fit(server_round, ndarrays_to_parameters([x.cpu().numpy()]), _Devices(proxies))
        config = dict(pairs[0][1].config) if pairs else {}
        ignored = sorted(set(config) - set(HONOURED_CONFIG) - self._said_ignored)
        if ignored:
            self._said_ignored.update(ignored)
            print(f"wirelessfl: {self.strategy_class.__name__}'s fit config key(s) {', '.join(ignored)} set nothing "
                  "here and are ignored", file=sys.stderr)
        return config

    def _local_updates(self, trainer: "Trainer", devices: np.ndarray, round_idx: int, config: dict):
        from ..config.limits import check_local_steps

        lr = config.get("lr", config.get("learning_rate"))
        steps = config.get("local_steps")
        name = f"{self.strategy_class.__name__}'s fit config"
        if steps is not None:
            check_local_steps(steps, f"{name} local_steps")
        if "local_epochs" in config:  # epochs over each device's data in minibatches of B
            sizes = trainer.data_sizes[devices]
            check_local_steps(config["local_epochs"], f"{name} local_epochs")
            steps = [int(config["local_epochs"]) * max(math.ceil(s / trainer.batch_size), 1) for s in sizes]
            check_local_steps(max(steps, default=0), f"{name} local_epochs x batches of the largest device")
        if lr is not None and not (isinstance(lr, (int, float)) and not isinstance(lr, bool)
                                   and math.isfinite(lr) and lr > 0):
            from ..fields import ConfigError

            raise ConfigError(f"{name} lr = {lr!r}: must be a finite number > 0")
        mu = float(config.get("proximal_mu", 0.0))
        direction = (lambda g, y, x0, anchor: g + mu * (y - x0)) if mu else None
        return trainer.local_updates(devices, round_idx, local_steps=steps,
                                     lr=None if lr is None else float(lr), direction=direction)

    def state_dict(self) -> dict:
        """What the strategy carries from round to round: its attributes that hold numbers, strings,
        arrays (NDArrays) and Flower's ``Parameters`` (kept as their bytes, exactly: FedAvgM's model),
        those of a strategy it wraps (the DP strategies'), and the state of its random stream."""
        state = _state_of(self.strategy) if self.strategy is not None else {}
        if self._numpy_random is not None:
            kind, keys, pos, has_gauss, cached = self._numpy_random
            state[_RANDOM] = [kind, np.asarray(keys, dtype=np.int64), int(pos), int(has_gauss), float(cached)]
        return state

    def load_state(self, state: dict) -> None:
        """Restore what ``state_dict`` kept."""
        if self.strategy is not None:
            state = dict(state)
            if _RANDOM in state:
                kind, keys, pos, has_gauss, cached = state.pop(_RANDOM)
                self._numpy_random = (kind, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached))
            _restore(self.strategy, state)

    def _own_numpy_random(self) -> None:
        """Make the strategy's calls draw from a random stream of their own: Flower's strategies draw
        from numpy's global random state (the DP strategies' noise), which the simulator neither
        seeds nor checkpoints. Each call of initialize_parameters, configure_fit and aggregate_fit
        runs with the stream's state (seeded from the scenario's seed, kept in checkpoints) and
        leaves numpy's global state as it found it."""
        for name in ("initialize_parameters", "configure_fit", "aggregate_fit"):
            setattr(self.strategy, name, self._in_own_random(getattr(self.strategy, name)))

    def _in_own_random(self, method):
        @functools.wraps(method)
        def call(*args, **kwargs):
            outer = np.random.get_state()
            if self._numpy_random is None:
                from .. import rng as rngs

                seed = int(rngs.stream(self.seed, "flower").integers(2 ** 32))
                self._numpy_random = np.random.RandomState(seed).get_state()
            np.random.set_state(self._numpy_random)
            try:
                return method(*args, **kwargs)
            finally:
                self._numpy_random = np.random.get_state()
                np.random.set_state(outer)

        return call


def _shown(value) -> str:
    """A value in a message: its type, and its text cut short."""
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _kind_of(value) -> str | None:
    """"bool", "int", "float" or "str" for a plain value, else None (no check)."""
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind.__name__
    return None


def _training_loss(trainer: "Trainer", server_round: int, arrays: list, config: dict):
    """A strategy's evaluate_fn: the training loss of the model ``arrays`` on the evaluation subset,
    and its test accuracy."""
    current = trainer.params
    trainer.params = _flat(arrays, trainer.num_params)
    try:
        metrics = trainer.evaluate()
    finally:
        trainer.params = current
    return metrics["train_loss"], {"accuracy": metrics["accuracy"]}


def _no_metrics(pairs: list) -> dict:
    """A strategy's fit_metrics_aggregation_fn: the devices report no metrics."""
    return {}


_PARAMETERS = "__flwr_parameters__"
"""The tag of a Flower Parameters object in a strategy's state (its tensors' bytes)."""
_STRATEGY = "__flwr_strategy__"
"""The tag of the state of a strategy that another wraps (the DP strategies' ``strategy``)."""
_RANDOM = "__numpy_random__"
"""The key of the strategy's random stream in its state."""
_TAGS = (_PARAMETERS, _STRATEGY, _RANDOM)


def _state_of(strategy) -> dict:
    """A strategy's attributes that a checkpoint holds: plain values as they are, Parameters by
    their bytes, a strategy it wraps by its own state (see FlowerStrategy.state_dict)."""
    from flwr.common import Parameters
    from flwr.server.strategy import Strategy

    state = {}
    for key, value in vars(strategy).items():
        if isinstance(value, Parameters):
            state[key] = {_PARAMETERS: [np.frombuffer(bytes(t), dtype=np.uint8).copy() for t in value.tensors],
                          "tensor_type": str(value.tensor_type)}
        elif isinstance(value, Strategy):
            state[key] = {_STRATEGY: _state_of(value)}
        elif _storable(value):
            state[key] = value
    return state


def _restore(strategy, state: dict) -> None:
    """Put back what _state_of kept."""
    from flwr.common import Parameters

    for key, value in state.items():
        if isinstance(value, dict) and _STRATEGY in value:
            _restore(getattr(strategy, key), value[_STRATEGY])
            continue
        if isinstance(value, dict) and _PARAMETERS in value:
            value = Parameters(tensors=[np.asarray(t, dtype=np.uint8).tobytes() for t in value[_PARAMETERS]],
                               tensor_type=value["tensor_type"])
        setattr(strategy, key, value)


def _storable(value) -> bool:
    """Numbers, strings, None, numeric arrays and lists, tuples and string-keyed dicts of them: what
    a checkpoint holds as it is (Parameters and wrapped strategies are stored by _state_of; the
    functions and objects a strategy was built with are left out: the constructor sets them, not
    the rounds)."""
    if isinstance(value, (list, tuple)):
        return all(_storable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and k not in _TAGS and _storable(v) for k, v in value.items())
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biufc"
    return isinstance(value, (bool, int, float, str, np.generic, type(None)))


def _flat(arrays: list, size: int):
    import torch

    flat = torch.as_tensor(np.concatenate([np.asarray(a, dtype=np.float32).reshape(-1) for a in arrays]))
    if flat.numel() != size:
        raise ValueError(f"the Flower strategy returned {flat.numel()} parameters; the model has {size}")
    return flat


@functools.cache
def _device_class():
    from flwr.server.client_proxy import ClientProxy

    class Device(ClientProxy):
        """A device as Flower's aggregation sees it: its id. The simulator trains it itself, so
        Flower's client calls are never made."""

        def _no_client(self, *args, **kwargs):
            raise NotImplementedError("wirelessfl trains the devices itself; a strategy cannot call them")

        get_properties = get_parameters = fit = evaluate = reconnect = _no_client

    return Device


class _Devices:
    """The client manager a strategy's configure_fit sees: the round's devices, which the scheduler
    chose. ``sample`` returns them all, whatever number the strategy asks for."""

    def __init__(self, proxies: list):
        self.proxies = proxies

    def num_available(self) -> int:
        return len(self.proxies)

    def all(self) -> dict:
        return {p.cid: p for p in self.proxies}

    def sample(self, num_clients: int, min_num_clients: int | None = None, criterion=None) -> list:
        return list(self.proxies)

    def wait_for(self, num_clients: int, timeout: int = 0) -> bool:
        return True

    def register(self, client) -> bool:
        return False

    def unregister(self, client) -> None:
        pass
