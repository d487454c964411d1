"""One device's local SGD steps as a captured CUDA graph, replayed for every update.

On a GPU one device's step of a small model is a few dozen kernels of a few microseconds each, and
launching them from Python costs more than running them: an asynchronous run, which trains one
device per update, used the GPU no better than one CPU thread. Captured once (per number of steps,
batch size and step size) and replayed, the K steps launch as one graph. The graph runs the same
kernels in the same order on the same values as the eager steps, so the numbers are the same
(benchmarks/training.py checks it on the device).

Used for the plain minibatch-gradient step of models without buffers (a buffer such as BatchNorm's
running mean would be moved by the capture's warm-up steps). A model whose step cannot be captured
is trained eagerly, with a warning, and gives the same numbers.
"""
from __future__ import annotations

import warnings

import torch

__all__ = ["LocalStepGraphs"]


class LocalStepGraphs:
    """The captured graphs of one trainer: at most ``limit`` of them (then the eager steps)."""

    limit = 8

    def __init__(self, trainer):
        self.trainer = trainer
        self._graphs: dict[tuple, tuple] = {}
        self._pool = None  # one memory pool shared by the graphs
        self.usable = True  # False once a capture failed

    def run(self, idx: torch.Tensor, lr: float) -> torch.Tensor | None:
        """y_K after the local steps from the global model on the minibatches ``idx`` (K, B) with step
        size ``lr``, as a new tensor; None when no graph can do it (the caller steps eagerly)."""
        key = (tuple(idx.shape), lr)
        captured = self._graphs.get(key)
        if captured is None:
            if not self.usable or len(self._graphs) >= self.limit:
                return None
            captured = self._capture(key)
            if captured is None:
                return None
        graph, static_idx, static_y = captured
        static_idx.copy_(idx)
        static_y.copy_(self.trainer.params)
        graph.replay()
        return static_y.clone()

    def _capture(self, key: tuple) -> tuple | None:
        trainer = self.trainer
        shape, lr = key
        static_idx = torch.zeros(shape, dtype=torch.int64, device=trainer.device)  # valid indices to warm up on
        static_y = trainer.params.clone()

        def steps():
            leaves = trainer._binding.bind(static_y)
            trainer._sgd_steps(leaves, trainer._x_train[static_idx], trainer._y_train[static_idx], lr)

        try:
            # warm-up on a side stream (autograd's and the libraries' lazy set-up must not be captured)
            current, side = torch.cuda.current_stream(trainer.device), torch.cuda.Stream(trainer.device)
            side.wait_stream(current)
            with torch.cuda.stream(side):
                for _ in range(2):
                    steps()
            current.wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool):
                steps()
        except RuntimeError as exc:
            self.usable = False
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            warnings.warn(f"the model's local steps cannot be captured as a CUDA graph ({reason}); "
                          "they run eagerly, with the same numbers", RuntimeWarning, stacklevel=4)
            return None
        self._pool = graph.pool()
        self._graphs[key] = (graph, static_idx, static_y)
        return self._graphs[key]
