"""How the training core runs its kernels on an accelerator."""
from __future__ import annotations

import contextlib
import functools

import torch

__all__ = ["float32_kernels", "plain_float32"]


@contextlib.contextmanager
def plain_float32():
    """cuDNN in plain float32 with deterministic algorithms, and matrix products in full float32,
    for the block; the caller's settings are restored after it (see float32_kernels)."""
    matmul = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        with torch.backends.cudnn.flags(enabled=torch.backends.cudnn.enabled, benchmark=False,
                                        deterministic=True, allow_tf32=False):
            yield
    finally:
        torch.set_float32_matmul_precision(matmul)


def float32_kernels(method):
    """Run a Trainer method with cuDNN in plain float32 and deterministic on CUDA.

    PyTorch lets cuDNN use TF32 (10-bit mantissa) convolutions and pick its algorithms by timing by
    default, and a process may allow TF32 matrix products (``torch.set_float32_matmul_precision``):
    on an H200 one round's updates then differ from the CPU's by 1e-3 (5% of the largest update)
    and may change from run to run. Off, a run matches the CPU to float32 rounding and repeats bit
    for bit, as the same scenario and seed must. Scoped to the call: the caller's settings are
    restored after it.
    """
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self.device.type != "cuda":
            return method(self, *args, **kwargs)
        with plain_float32():
            return method(self, *args, **kwargs)
    return wrapper
