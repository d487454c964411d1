"""The training core: one global model and batched local SGD for the selected devices (evaluation: its base class, evaluation.py).

The engine calls it once per round. It knows nothing about time, SimPy or the channel: it is told
which devices train in which round and returns their model deltas.

Batching: every selected device starts from the same global model x_t, so the k devices' local
runs are k independent SGD trajectories of the same network. They are computed together: the k
parameter vectors are stacked into a (k, d) tensor and each local step is one
``vmap(grad(loss))`` call over that stack (torch.func), instead of a Python loop over devices.

Randomness: each (round, device) pair has its own minibatch stream, a child of the named stream
"minibatch" keyed by (round, device). A device's batches therefore do not depend on which other
devices were selected, in which order, or in which chunk they were computed. The initial model
comes from the "model_init" torch generator; nothing global is seeded or read.

One module of about 570 lines, above the 500 the project aims for: the Trainer's paths (batched,
loop, CUDA graph, server steps, aggregation) share its flat parameters, bound module and data on the
device; its binding and its graphs are modules of their own (binding.py, graphs.py).
"""
from __future__ import annotations

import functools
import inspect
import math
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from wirelessfl.learning import lean_func
from wirelessfl.learning.binding import FlatBinding
from wirelessfl.learning.datasets import Dataset
from wirelessfl.learning.device_state import DeviceState, DeviceStates
from wirelessfl.learning.evaluation import Evaluation
from wirelessfl.learning.graphs import LocalStepGraphs
from wirelessfl.learning.models import build_model
from wirelessfl.learning.numerics import float32_kernels
from wirelessfl.rng import stream, torch_generator

__all__ = ["Direction", "LocalDirection", "Trainer"]

Direction = Callable[..., torch.Tensor]
"""A local step direction: (g, y, x0, anchor_grad) -> d, or (g, y, x0, anchor_grad, devices=...) -> d for
one that keeps per-device state (see Trainer.local_updates)."""


def _wants_devices(direction) -> bool:
    """Whether a direction takes the ``devices`` keyword (to be told which devices it computes for)."""
    try:
        params = inspect.signature(direction).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature
        return False
    return any(p.name == "devices" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _hvp(func_grad, flat: torch.Tensor, v: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The gradient of func_grad(flat, x, y) . v with v held fixed: a Hessian-vector product."""
    return grad(lambda p: torch.dot(func_grad(p, x, y), v))(flat)


def _device_indices(device_indices: Sequence[np.ndarray], n_train: int) -> list[np.ndarray]:
    """Each device's training sample indices as int64 vectors, checked to lie in [0, n_train)."""
    indices = [np.asarray(ix, dtype=np.int64).reshape(-1) for ix in device_indices]
    for n, ix in enumerate(indices):
        if ix.size and (ix.min() < 0 or ix.max() >= n_train):
            raise ValueError(f"device {n}: indices must lie in [0, {n_train}), got [{ix.min()}, {ix.max()}]")
    return indices


class LocalDirection:
    """A local step direction built from the minibatch gradient g(y) (FedShuffle,
    docs/papers/fedshuffle.md, "Global momentum and the local step direction"):

        d = grad_scale * g(y) - anchor_weight * g(x_t) + drift,

    with g(x_t) the same minibatch's gradient at the round's start model. Global momentum as in the
    paper's networks: grad_scale = a, drift = (1 - a) m. FedShuffleMVR: grad_scale = 1,
    anchor_weight = 1 - a, drift = (1 - a) m, i.e. d = g(y) + (1 - a)(m - g(x_t)).
    """

    def __init__(self, grad_scale: float = 1.0, anchor_weight: float = 0.0, drift: torch.Tensor | None = None):
        self.grad_scale, self.anchor_weight = float(grad_scale), float(anchor_weight)
        self.drift = None if drift is None else drift.to(dtype=torch.float32)

    def __call__(self, g: torch.Tensor, y: torch.Tensor, x0: torch.Tensor, anchor_grad) -> torch.Tensor:
        """d from g (a vector, or one row per device); ``anchor_grad()`` gives g(x_t) alike."""
        if self.grad_scale != 1.0:
            g = g * self.grad_scale
        if self.anchor_weight:
            g = g - self.anchor_weight * anchor_grad()
        if self.drift is not None:
            g = g + self.drift
        return g


class Trainer(Evaluation):
    """Global model state plus local training and evaluation for ``len(device_indices)`` devices.

    dataset: the pooled data; device_indices[n]: indices into ``dataset.x_train`` held by device n.
    model: a built-in model's name or a model part (``model(input_shape, num_classes, **model_options)``
        returns the module); model_options: its options (an Options instance or a dict).
    local_steps (K), batch_size (B), lr (gamma): local SGD y_{i+1} = y_i - gamma g_n(y_i), K steps.
    root_seed: the scenario's seed (streams "model_init", "minibatch", "eval_train_subset").
    device: torch device for all tensors ("cpu", "cuda", ...).
    eval_train_samples: size of the fixed random subset of the devices' training data (their union)
        on which ``evaluate`` measures the training loss.
    eval_batch_size: samples per forward pass when evaluating (512: on one CPU thread the small CNN
        evaluates 1.7x faster than in batches of 2048, which spill out of the caches; the MLP the same).
    max_devices_per_batch: compute at most this many devices in one vmap call (bounds memory for
        large models or many selected devices; results do not depend on it). None: all at once.
    batching: "vmap" (all selected devices in one vectorised call per step), "loop" (one device
        after another, the reference path; on CUDA each device's plain steps replayed as a captured
        graph, see ``cuda_graphs``) or "auto" (the faster of the two for the model, the device type
        and the number of devices: see ``batching_for``).
    server_indices: training samples held by the server itself (SAFARI's auxiliary set), not by
        any device.

    Attributes: ``cuda_graphs`` (on CUDA, True: one device's plain local steps run as a captured CUDA
    graph, graphs.py, with the same numbers; set it False to launch them eagerly), ``params`` (flat
    float32 vector of the global model, on ``device``), ``num_params``
    (d), ``model_bits`` (32 d, the upload size ℓ), ``model`` (the module, used only functionally),
    ``data_sizes`` (|D_n| of every device), ``server_indices``.
    """

    def __init__(
        self,
        dataset: Dataset,
        device_indices: Sequence[np.ndarray],
        model,
        *,
        local_steps: int = 10,
        batch_size: int = 32,
        lr: float = 0.01,
        root_seed: int = 0,
        device: str | torch.device = "cpu",
        eval_train_samples: int = 10000,
        eval_batch_size: int = 512,
        max_devices_per_batch: int | None = None,
        batching: str = "auto",
        server_indices: np.ndarray | None = None,
        model_options=None,
    ):
        if local_steps < 1 or batch_size < 1:
            raise ValueError(f"local_steps and batch_size must be >= 1, got {local_steps}, {batch_size}")
        if batching not in ("auto", "vmap", "loop"):
            raise ValueError(f"batching = {batching!r}: must be one of 'auto', 'vmap', 'loop'")
        if max_devices_per_batch is not None and max_devices_per_batch < 1:
            raise ValueError(f"max_devices_per_batch must be >= 1 or None, got {max_devices_per_batch}")
        self.dataset = dataset
        self.device = torch.device(device)
        self.local_steps = int(local_steps)
        self.batch_size = int(batch_size)
        self.lr = float(lr)
        self.root_seed = int(root_seed)
        self.uplink = None  # the devices' side of compression (wirelessfl.learning.compression.Uplink), if any
        self.vectors_sent = 0  # rows passed through ``upload`` (the learner checks compressed runs with it)
        self.eval_batch_size = int(eval_batch_size)
        self.max_devices_per_batch = max_devices_per_batch
        self._indices = _device_indices(device_indices, len(dataset.y_train))
        self.num_devices = len(self._indices)
        self.data_sizes = np.array([ix.size for ix in self._indices], dtype=np.int64)
        self.server_indices = np.asarray([] if server_indices is None else server_indices, dtype=np.int64)

        self._build_model(model, model_options)
        # over-the-air aggregation: noise for the next aggregate (wirelessfl.access.UplinkFacts.noise_var),
        # drawn from the "aircomp" stream keyed by the number of aggregations so far
        self.aggregate_noise_var = 0.0
        self.aggregations = 0
        self.num_params = int(self._params.numel())
        self.model_bits = 32 * self.num_params
        self._place_data(dataset, eval_train_samples)

        # Per-device gradient of the minibatch loss, vectorised over a stack of parameter vectors; its
        # loss and transforms import nothing of torch's compiler (lean_func.py), with the same numbers.
        self._func_grad = grad(self.loss)  # composable with grad (hvp)
        self._batched_func_grad = grad(self._batched_loss)
        self.batched_grad = lean_func.scoped(vmap(self._batched_func_grad))
        # per-device Hessian-vector products over a stack
        self.batched_hvp = lean_func.scoped(vmap(self._batched_hvp))
        self._binding = FlatBinding(self.model)
        # one device's local steps replayed as a captured CUDA graph (graphs.py; False: always eager)
        self.cuda_graphs = self.device.type == "cuda"
        self._graphs: LocalStepGraphs | None = None
        self.batching = batching
        self._has_conv = any(isinstance(mod, torch.nn.modules.conv._ConvNd) for mod in self.model.modules())
        self._has_buffers = next(iter(self.model.buffers()), None) is not None
        self.device_states = DeviceStates(self.num_devices, self.device)
        # (device, round) of the first local update that was not finite (None: none so far)
        self.nonfinite_local: tuple[int, int] | None = None

    def _build_model(self, model, model_options) -> None:
        """The model, built on the CPU from the named generator and then moved (identical models on
        every device type), and its flat parameters with the names, shapes and sizes to unflatten them."""
        model = build_model(model, self.dataset.input_shape, self.dataset.num_classes, options=model_options,
                            generator=torch_generator(self.root_seed, "model_init"))
        model.requires_grad_(False)  # parameters are passed in functionally; the module's own are unused
        self.model = model.to(self.device)
        named = list(self.model.named_parameters())
        self._names = [name for name, _ in named]
        self._shapes = [p.shape for _, p in named]
        self._numels = [p.numel() for _, p in named]
        self._params = torch.cat([p.detach().reshape(-1) for _, p in named]).to(torch.float32).clone()

    def _place_data(self, dataset: Dataset, eval_train_samples: int) -> None:
        """The data on the training device, and the training samples the train accuracy is measured
        on (at most ``eval_train_samples`` of those the devices hold, drawn once)."""
        self._x_train = dataset.x_train.to(self.device)
        self._y_train = dataset.y_train.to(self.device)
        self._x_test = dataset.x_test.to(self.device)
        self._y_test = dataset.y_test.to(self.device)
        union = np.unique(np.concatenate(self._indices)) if self._indices else np.empty(0, np.int64)
        if union.size > eval_train_samples:
            union = np.sort(stream(self.root_seed, "eval_train_subset").choice(union, eval_train_samples,
                                                                                 replace=False))
        self._eval_train_idx = torch.from_numpy(union).to(self.device)

    def device_state(self, name: str, width: int | None = None) -> DeviceState:
        """The per-device state ``name``: an (N, width) float32 array, zero at first, read and written
        by device index (``state[devices]``, ``state[devices] = rows``) and checkpointed by the rows
        that changed (wirelessfl.learning.device_state). ``width`` None: the model's size d."""
        return self.device_states.get(name, self.num_params if width is None else int(width))

    # ------------------------------------------------------------------------------------------
    # parameters

    @property
    def params(self) -> torch.Tensor:
        """The global model x_t as one flat float32 vector of length ``num_params``."""
        return self._params

    @params.setter
    def params(self, value: torch.Tensor) -> None:
        value = torch.as_tensor(value, dtype=torch.float32, device=self.device).reshape(-1)
        if value.numel() != self.num_params:
            raise ValueError(f"params must have {self.num_params} entries, got {value.numel()}")
        self._params = value.clone()

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """View a flat parameter vector as the module's {name: tensor} dict (no copy)."""
        return {
            name: piece.view(shape)
            for name, piece, shape in zip(self._names, torch.split(flat, self._numels), self._shapes)
        }

    @float32_kernels
    def loss(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of the model with parameters ``flat`` on the batch (x, y)."""
        return F.cross_entropy(functional_call(self.model, self.unflatten(flat), (x,)), y)

    @float32_kernels
    def _batched_loss(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """:meth:`loss` as vmap batches it without importing sympy (lean_func.cross_entropy)."""
        return lean_func.cross_entropy(functional_call(self.model, self.unflatten(flat), (x,)), y)

    @float32_kernels
    def grad(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Gradient of :meth:`loss` at ``flat`` on the batch (x, y), a flat vector."""
        return self._grad(flat, x, y)

    def _grad(self, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # Plain reverse-mode autograd, not torch.func.grad: the same gradient, and on the CPU a
        # convolutional step costs 9% less (benchmarks/training.py --grad); only the vmap and hvp
        # paths need the composable transform
        with torch.enable_grad():
            leaf = flat.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.loss(leaf, x, y), leaf)
        return g

    @float32_kernels
    def hvp(self, flat: torch.Tensor, v: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Hessian-vector product of :meth:`loss` at ``flat`` on (x, y) with ``v``, a flat vector: the
        gradient of g(flat) . v with v held fixed (reverse over reverse: forward over reverse was slower
        and, inside torch, imports its compiler)."""
        with lean_func.lean_grad():
            return _hvp(self._func_grad, flat, v, x, y)

    @float32_kernels
    def _batched_hvp(self, flat: torch.Tensor, v: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # :meth:`hvp` of one device as vmap batches it (of :meth:`_batched_loss`)
        return _hvp(self._batched_func_grad, flat, v, x, y)

    def batch(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The training samples at ``indices`` (into ``dataset.x_train``) on the trainer's device."""
        ix = torch.as_tensor(indices, device=self.device)
        return self._x_train[ix], self._y_train[ix]

    # ------------------------------------------------------------------------------------------
    # local training

    def _minibatch_rng(self, device: int, round_idx: int, stream_name: str = "minibatch") -> np.random.Generator:
        # A child of the named stream (default "minibatch"), keyed by (round, device): independent of
        # the other selected devices and of the order in which devices are processed.
        return stream(self.root_seed, stream_name, round_idx, device)

    def minibatch_indices(self, device: int, round_idx: int, local_steps: int | None = None, *,
                          stream_name: str = "minibatch") -> torch.LongTensor:
        """The training-set indices device ``device`` uses in round ``round_idx``, shape (K, B).

        Each round the device walks through a fresh random permutation of its own samples (no
        repeats within a round until its data is used up, then a new permutation continues), cut
        into K consecutive minibatches of B. Indices are into ``dataset.x_train`` (CPU tensor).
        ``stream_name`` picks the named stream: algorithms that need several independent batches
        per step (Per-FedAvg's D, D', D'') give each its own name.
        """
        steps = self.local_steps if local_steps is None else int(local_steps)
        pool = self._indices[device]
        if pool.size == 0:
            raise ValueError(f"device {device} holds no training samples and cannot train")
        rng = self._minibatch_rng(device, round_idx, stream_name)
        need = steps * self.batch_size
        order = np.concatenate([rng.permutation(pool.size) for _ in range(math.ceil(need / pool.size))])
        return torch.from_numpy(pool[order[:need]].reshape(steps, self.batch_size))

    @float32_kernels
    def local_updates(
        self,
        devices: Sequence[int],
        round_idx: int,
        *,
        local_steps: int | Sequence[int] | None = None,
        lr: float | Sequence[float] | None = None,
        direction: "Direction | None" = None,
        upload: bool = True,
    ) -> torch.Tensor:
        """Run local SGD from the current global model for every device in ``devices``.

        Returns the deltas y_K - x_t, shape (len(devices), num_params), in the order of
        ``devices``. ``local_steps`` and ``lr`` override the trainer's K and gamma, either for all
        devices or per device (for algorithms such as FedShuffle whose step count or step size
        differs by device). ``direction`` replaces the plain minibatch gradient g(y) by
        ``direction(g, y, x0, anchor_grad)``, with y the current local model, x0 the global model
        and ``anchor_grad()`` the same minibatch's gradient at x0: a proximal term (FedProx:
        g + mu (y - x0)) or a momentum direction (:class:`LocalDirection`, FedShuffle). g and y
        are one device's vectors (d,) or a stack (k, d), x0 is (d,). A direction that takes a
        ``devices`` keyword is also told which devices it computes for: the device's index (an int)
        with vectors, a LongTensor (k,) with a stack, so that ``state[devices]`` has g's shape on both
        paths (per-device state, as SCAFFOLD's control variates). The global model is not changed.
        ``upload``: the deltas are what the devices send, as the server receives them (``upload``);
        False: as computed (an algorithm that sends something made from them calls ``upload`` itself).
        """
        devices = [int(n) for n in devices]
        k = len(devices)
        for n in devices:
            if not 0 <= n < self.num_devices:
                raise ValueError(f"device {n} out of range [0, {self.num_devices})")
        steps = np.broadcast_to(np.asarray(self.local_steps if local_steps is None else local_steps), (k,))
        lrs = np.broadcast_to(np.asarray(self.lr if lr is None else lr, dtype=np.float64), (k,))
        if np.any(steps < 0):
            raise ValueError(f"local_steps must be >= 0, got {steps}")
        out = torch.empty(k, self.num_params, dtype=torch.float32, device=self.device)
        chunk = k if self.max_devices_per_batch is None else self.max_devices_per_batch
        for start in range(0, k, max(chunk, 1)):
            sl = slice(start, min(start + chunk, k))
            out[sl] = self._run_local(devices[sl], round_idx, steps[sl], lrs[sl], direction)
        # one sum first (a sum of finite numbers is almost always finite), the exact test only if not
        if self.nonfinite_local is None and k and not math.isfinite(float(out.sum())) \
                and not bool(torch.isfinite(out).all()):
            bad = int(torch.nonzero(~torch.isfinite(out).all(dim=1))[0])
            self.nonfinite_local = (devices[bad], round_idx)  # where a divergence first showed (see learner)
        return self.upload(devices, out, round_idx) if upload else out

    def upload(self, devices: Sequence[int], vectors: torch.Tensor, round_idx: int, vector: int = 0) -> torch.Tensor:
        """What the server receives of the devices' model-sized ``vectors`` (one row each): with a
        compressor (``learning.compression``, ``self.uplink``) each row encoded and decoded, with its
        error feedback; else the rows themselves. ``vector`` numbers an algorithm's vectors (SCAFFOLD
        sends two), each with its own memory. A local rule that does not end in ``local_updates``
        passes what it sends through here."""
        self.vectors_sent += len(devices)
        return vectors if self.uplink is None else self.uplink.send(devices, vectors, round_idx, vector)

    def batching_for(self, k: int, plain: bool = True) -> str:
        """The path that computes ``k`` devices' local updates: "vmap" or "loop".

        "auto" picks what ``benchmarks/training.py`` measured faster, by a fixed rule so that a run
        always takes the same path. On a GPU (H200) the loop replays each device's steps as a captured
        CUDA graph (``plain``: the plain minibatch-gradient step, no direction, a model without
        buffers): 1.9 ms per device for the MLP, so the loop wins up to about 30 devices (m = 10:
        11.8 against 36.7 ms; m = 100: 108 against 45), and one batched call from 32 devices on;
        steps that cannot be graphed cost 14 ms per device, and the batched call wins from 3. On the
        CPU vmap for models without convolutions from 5 devices on, else the loop (vmap turns
        convolutions into grouped ones, no faster there).
        """
        if self.batching != "auto":
            return self.batching
        if self.device.type != "cpu":
            return "vmap" if k >= (32 if plain and self._graphable else 3) else "loop"
        return "vmap" if k >= 5 and not self._has_conv else "loop"

    @property
    def _graphable(self) -> bool:
        """Whether one device's plain local steps run as a captured CUDA graph (graphs.py)."""
        return self.cuda_graphs and not self._has_buffers

    def _run_local(self, devices: list[int], round_idx: int, steps: np.ndarray, lrs: np.ndarray,
                   direction: "Direction | None" = None) -> torch.Tensor:
        k, kmax = len(devices), int(steps.max())
        x0 = self._params
        if kmax == 0:
            return torch.zeros(k, self.num_params, dtype=torch.float32, device=self.device)
        batches = []
        for n, s in zip(devices, steps):
            b = self.minibatch_indices(n, round_idx, max(int(s), 1))
            if b.shape[0] < kmax:  # pad; the padded steps get step size 0 below
                b = torch.cat([b, b[:1].expand(kmax - b.shape[0], -1)])
            batches.append(b)
        idx = torch.stack(batches).to(self.device)  # (k, K, B)
        told = direction is not None and _wants_devices(direction)
        if self.batching_for(k, plain=direction is None) == "loop":
            directions = [functools.partial(direction, devices=n) for n in devices] if told else [direction] * k
            return self._run_loop(idx, steps, lrs, directions)
        if told:
            direction = functools.partial(direction, devices=torch.as_tensor(devices, dtype=torch.int64,
                                                                             device=self.device))
        uniform = bool(np.all(steps == kmax) and np.all(lrs == lrs[0]))
        if not uniform:
            # step_size[s, j] = lr_j while step s < K_j, else 0 (device j has finished).
            step_size = torch.as_tensor(
                (np.arange(kmax)[:, None] < steps[None, :]) * lrs[None, :], dtype=torch.float32, device=self.device
            )
        y = x0.expand(k, -1).clone()
        for s in range(kmax):
            b = idx[:, s]  # (k, B): gather only this step's batch, not all K at once
            xb, yb = self._x_train[b], self._y_train[b]
            g = self.batched_grad(y, xb, yb)
            if direction is not None:
                g = direction(g, y, x0, lambda: self.batched_grad(x0.expand(k, -1), xb, yb))
            if uniform:
                y.sub_(g, alpha=float(lrs[0]))
            else:
                y.sub_(g * step_size[s, :, None])
        return y.sub_(x0)

    def _run_loop(self, idx: torch.Tensor, steps: np.ndarray, lrs: np.ndarray,
                  directions: list) -> torch.Tensor:
        # The module is bound to leaves sharing each device's y once (not re-bound every step, as
        # functional_call would): the same gradients, less Python per step (binding.py)
        x0 = self._params
        out = torch.empty(len(steps), self.num_params, dtype=torch.float32, device=self.device)
        graphable = self._graphable
        with self._binding.bound() as bind, torch.enable_grad():
            for j, (k_j, lr_j, direction) in enumerate(zip(steps, lrs, directions)):
                if direction is None and graphable and k_j > 0:
                    self._graphs = self._graphs or LocalStepGraphs(self)
                    replayed = self._graphs.run(idx[j, :k_j], float(lr_j))
                    if replayed is not None:
                        out[j] = replayed.sub_(x0)
                        continue
                y = x0.clone()
                leaves = bind(y)
                xs, ys = self._x_train[idx[j, :k_j]], self._y_train[idx[j, :k_j]]  # one gather per device
                if direction is None:
                    self._sgd_steps(leaves, xs, ys, float(lr_j))
                else:
                    for xb, yb in zip(xs, ys):
                        g = self._binding.flat_grad(self._bound_loss(xb, yb), leaves)
                        with torch.no_grad():
                            y.sub_(direction(g, y, x0, lambda: self._grad(x0, xb, yb)), alpha=float(lr_j))
                out[j] = y.sub_(x0)
        return out

    def _bound_loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """:meth:`loss` of the module as bound (binding.py) on the batch (x, y)."""
        return F.cross_entropy(self.model(x), y)

    def _sgd_steps(self, leaves: list[torch.Tensor], xs: torch.Tensor, ys: torch.Tensor, lr: float) -> None:
        """Plain local SGD on the module bound to ``leaves``: one step per minibatch (xs[s], ys[s]),
        the pieces of y changed in place (the same numbers as y - lr g, without a flat copy of g)."""
        for xb, yb in zip(xs, ys):
            grads = self._binding.grads(self._bound_loss(xb, yb), leaves)
            with torch.no_grad():
                torch._foreach_sub_(leaves, grads, alpha=lr)

    @float32_kernels
    def full_gradients(self, devices: Sequence[int], params: torch.Tensor | None = None) -> torch.Tensor:
        """grad f_n at ``params`` (default: the global model) over all of device n's data, shape
        (len(devices), num_params): the full local passes of FedShuffleMVR
        (docs/papers/fedshuffle.md, "Global momentum and the local step direction")."""
        flat = self._params if params is None else torch.as_tensor(params, dtype=torch.float32, device=self.device)
        out = torch.empty(len(devices), self.num_params, dtype=torch.float32, device=self.device)
        for j, n in enumerate(devices):
            pool = torch.from_numpy(self._indices[int(n)]).to(self.device)
            if pool.numel() == 0:
                raise ValueError(f"device {n} holds no training samples")
            total = torch.zeros(self.num_params, dtype=torch.float32, device=self.device)
            for start in range(0, pool.numel(), self.eval_batch_size):
                ix = pool[start:start + self.eval_batch_size]
                total += self._grad(flat, self._x_train[ix], self._y_train[ix]) * ix.numel()
            out[j] = total / pool.numel()
        return out

    @float32_kernels
    def server_sgd(self, indices: np.ndarray, round_idx: int, *, steps: int | None = None,
                   batch_size: int | None = None, lr: float | None = None) -> int:
        """SGD on the global model over the training samples ``indices`` (a server's own data).

        The server walks through random permutations of ``indices`` (a child of the named stream
        "server_minibatch" keyed by the round) in minibatches of min(B, |indices|); ``steps`` None is
        one epoch, ceil(|indices| / B) steps, the last batch possibly smaller. Changes ``params`` in
        place and returns the number of steps taken.
        """
        pool = np.asarray(indices, dtype=np.int64).reshape(-1)
        if pool.size == 0:
            raise ValueError("the server holds no samples and cannot train")
        b = min(self.batch_size if batch_size is None else int(batch_size), pool.size)
        lr = self.lr if lr is None else float(lr)
        rng = stream(self.root_seed, "server_minibatch", round_idx)
        if steps is None:
            order = pool[rng.permutation(pool.size)]
            batches = [order[i:i + b] for i in range(0, pool.size, b)]
        else:
            need = int(steps) * b
            order = np.concatenate([rng.permutation(pool.size) for _ in range(math.ceil(need / pool.size))])
            batches = list(pool[order[:need]].reshape(int(steps), b))
        y = self._params.clone()
        for batch in batches:
            ix = torch.from_numpy(np.ascontiguousarray(batch)).to(self.device)
            y.sub_(self._grad(y, self._x_train[ix], self._y_train[ix]), alpha=lr)
        self._params = y
        return len(batches)

    @float32_kernels
    def local_objectives(self, devices: Sequence[int], with_gradients: bool = True,
                         max_samples: int | None = None,
                         chunk: int = 2048) -> tuple[np.ndarray | None, np.ndarray]:
        """f_n(x_t) and optionally grad f_n(x_t) over each device's whole local training set, at the
        current global model (what fair selection stores on the server, docs/papers/fair_selection.md,
        "The server's gradient store and its uplink cost").
        ``max_samples``: use at most this many of the device's samples, evenly spaced over its
        (index-sorted) set, the same ones every time (cheaper estimates; None: all).

        Returns (gradients as float32 numpy (k, d) or None, losses (k,)). The gradient of the mean
        loss is accumulated over chunks of ``chunk`` samples, weighted by their share.
        """
        devices = [int(n) for n in devices]
        grads = np.empty((len(devices), self.num_params), dtype=np.float32) if with_gradients else None
        losses = np.empty(len(devices))
        params = self._params
        for j, n in enumerate(devices):
            ix_n = self._indices[n]
            if max_samples is not None and ix_n.size > max_samples:
                ix_n = ix_n[np.linspace(0, ix_n.size - 1, int(max_samples)).round().astype(np.int64)]
            pool = torch.from_numpy(ix_n).to(self.device)
            total, g = 0.0, torch.zeros_like(params) if with_gradients else None
            for start in range(0, pool.numel(), chunk):
                ix = pool[start:start + chunk]
                share = ix.numel() / pool.numel()
                x, y = self._x_train[ix], self._y_train[ix]
                if with_gradients:
                    g += share * self._grad(params, x, y)
                with torch.no_grad():
                    total += share * float(self.loss(params, x, y))
            losses[j] = total
            if with_gradients:
                grads[j] = g.cpu().numpy()
        return grads, losses

    def aggregate(self, deltas: torch.Tensor, weights: Sequence[float] | np.ndarray | torch.Tensor) -> None:
        """x_{t+1} = x_t + sum_k weights[k] * deltas[k] (the algorithm chooses the weights), plus the
        channel's noise when the uplink set ``aggregate_noise_var`` (see :meth:`aggregate_noise`)."""
        w = torch.as_tensor(np.asarray(weights, dtype=np.float32) if not isinstance(weights, torch.Tensor) else weights)
        w = w.to(dtype=torch.float32, device=self.device).reshape(-1)
        if deltas.ndim != 2 or deltas.shape[1] != self.num_params or deltas.shape[0] != w.numel():
            raise ValueError(f"need deltas (k, {self.num_params}) and k weights, got {tuple(deltas.shape)} and {w.numel()}")
        if w.numel():
            deltas = deltas.to(self.device)
            step = w @ deltas
            if self.aggregate_noise_var > 0:
                step = step + self.aggregate_noise(deltas, w)
            # a new tensor, not an update in place: the event protocols keep earlier versions
            # (the models devices started from) by reference
            self._params = self._params + step
        self.aggregate_noise_var = 0.0
        self.aggregations += 1

    def aggregate_noise(self, deltas: torch.Tensor, weights: torch.Tensor, *, vector: int = 0) -> torch.Tensor:
        """Gaussian noise on every entry of the aggregate, of variance aggregate_noise_var x P, where P
        is the mean power per entry of the updates as the devices send them (k w_k delta_k, so
        that their mean is the aggregate): an over-the-air sum of updates normalised to unit power
        and scaled back at the server. ``vector``: which of an upload's vectors is summed (0: the
        model's, which ``aggregate`` adds; 1, ...: an algorithm's others, e.g. SCAFFOLD's control
        variates), each with noise of its own. Call it before ``aggregate``, which clears the variance."""
        sent = deltas * (weights.numel() * weights)[:, None]
        power = float(sent.square().mean())
        rng = stream(self.root_seed, "aircomp", self.aggregations, *((vector,) if vector else ()))
        noise = torch.from_numpy(rng.standard_normal(deltas.shape[1], dtype=np.float32)).to(self.device)
        return noise * math.sqrt(self.aggregate_noise_var * power)
