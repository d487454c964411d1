"""Evaluation of the global model, a part of the Trainer (its base class): test accuracy and
loss, the training loss on a fixed subset, which test samples it gets right (the fairness metrics),
and the personalised accuracy of Per-FedAvg. The Trainer's state (the model, the data on its
device, the global parameters) is what these read; nothing here trains."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from ..rng import stream
from .numerics import float32_kernels

__all__ = ["Evaluation"]


class Evaluation:
    """The Trainer's evaluation methods (mixed into :class:`wirelessfl.learning.Trainer`)."""

    @torch.no_grad()
    @float32_kernels
    def test_correct(self, idx: np.ndarray) -> np.ndarray:
        """Whether the global model classifies each test sample ``idx`` correctly (boolean array)."""
        ix = torch.from_numpy(np.asarray(idx, dtype=np.int64)).to(self.device)
        params = self.unflatten(self._params)
        out = []
        for start in range(0, ix.numel(), self.eval_batch_size):
            b = ix[start:start + self.eval_batch_size]
            out.append((functional_call(self.model, params, (self._x_test[b],)).argmax(1) == self._y_test[b]).cpu())
        return torch.cat(out).numpy() if out else np.zeros(0, dtype=bool)

    @torch.no_grad()
    def _loss_acc(self, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor | None = None) -> tuple[float, float]:
        n = len(y) if idx is None else len(idx)
        if n == 0:
            return float("nan"), float("nan")
        params = self.unflatten(self._params)
        loss_sum, correct = 0.0, 0
        for start in range(0, n, self.eval_batch_size):
            sel = slice(start, start + self.eval_batch_size)
            xb, yb = (x[sel], y[sel]) if idx is None else (x[idx[sel]], y[idx[sel]])
            logits = functional_call(self.model, params, (xb,))
            loss_sum += float(F.cross_entropy(logits, yb, reduction="sum"))
            correct += int((logits.argmax(1) == yb).sum())
        return loss_sum / n, correct / n

    @float32_kernels
    def personalised_evaluate(self, test_indices: Sequence[np.ndarray], alpha: float, *,
                              batch_size: int | None = None, adapt_on: str = "train") -> dict:
        """Personalised accuracy of the global model (docs/papers/perfedavg.md, "Personalised, local and
        global accuracy"), for every device.

        Device n takes exactly one SGD step of size ``alpha`` from the global model on one batch of
        its own data (``batch_size`` samples, default B, drawn from the stream "personal_adapt" keyed
        by the device, so every evaluation uses the same batch), then is tested on its own test split
        ``test_indices[n]`` (indices into ``dataset.x_test``). ``adapt_on`` "test" draws the batch
        from the test split instead (the paper's wording). Nothing but device n's own samples enters
        its number. Returns the unweighted mean and std over devices with a test split
        (``personal_accuracy``, ``personal_accuracy_std``), the mean accuracy of the unadapted model on
        the same splits (``local_accuracy``) and the per-device values (``personal_per_device``).
        """
        if adapt_on not in ("train", "test"):
            raise ValueError(f"adapt_on = {adapt_on!r}: must be 'train' or 'test'")
        if len(test_indices) != self.num_devices:
            raise ValueError(f"need one test split per device ({self.num_devices}), got {len(test_indices)}")
        b = self.batch_size if batch_size is None else int(batch_size)
        w = self._params
        personal = np.full(self.num_devices, np.nan)
        local = np.full(self.num_devices, np.nan)
        for n, test_ix in enumerate(test_indices):
            test_ix = np.asarray(test_ix, dtype=np.int64)
            own = self._indices[n] if adapt_on == "train" else test_ix
            if test_ix.size == 0 or own.size == 0:
                continue
            rng = stream(self.root_seed, "personal_adapt", n)
            adapt = torch.from_numpy(own[rng.permutation(own.size)[: min(b, own.size)]]).to(self.device)
            x_a, y_a = (self._x_train[adapt], self._y_train[adapt]) if adapt_on == "train" else \
                (self._x_test[adapt], self._y_test[adapt])
            w_n = w - alpha * self._grad(w, x_a, y_a)
            ix = torch.from_numpy(test_ix).to(self.device)
            x_t, y_t = self._x_test[ix], self._y_test[ix]
            with torch.no_grad():
                personal[n] = float((functional_call(self.model, self.unflatten(w_n), (x_t,)).argmax(1) == y_t)
                                    .float().mean())
                local[n] = float((functional_call(self.model, self.unflatten(w), (x_t,)).argmax(1) == y_t)
                                 .float().mean())
        return {"personal_accuracy": float(np.nanmean(personal)), "personal_accuracy_std": float(np.nanstd(personal)),
                "local_accuracy": float(np.nanmean(local)), "personal_per_device": personal}

    @float32_kernels
    def evaluate(self) -> dict[str, float]:
        """Evaluate the global model.

        Returns accuracy and test_loss on the whole test set, and train_loss / train_accuracy on
        the fixed subset of the devices' training data (``eval_train_samples`` samples).
        """
        test_loss, acc = self._loss_acc(self._x_test, self._y_test)
        train_loss, train_acc = self._loss_acc(self._x_train, self._y_train, self._eval_train_idx)
        return {"accuracy": acc, "test_loss": test_loss, "train_loss": train_loss, "train_accuracy": train_acc}
