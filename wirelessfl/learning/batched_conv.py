"""Convolutions as matrix products, for the batched path on an accelerator.

Vectorised over devices (``vmap``), a convolution whose weights differ by device becomes one grouped
convolution, and cuDNN's deterministic float32 algorithms run grouped convolutions slowly: a paper_cnn
step used a ninth of an H200's float32 rate and did not speed up with more devices. Written as the
product of the weights with the input's unfolded patches (im2col), the device dimension becomes the
batch dimension of one batched matrix product, which scales with the number of devices. The same
convolution up to float32 rounding; on the CPU the grouped convolution stays faster (about 4x at
5 to 20 devices), so the trainer uses this twin on accelerators only.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MatmulConv2d", "matmul_twin"]


class MatmulConv2d(nn.Conv2d):
    """An ``nn.Conv2d`` (one group, zero padding) computed as weights @ unfolded patches."""

    def _conv_forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        unbatched = x.dim() == 3
        if unbatched:
            x = x.unsqueeze(0)
        n, _, h, w = x.shape
        cols = F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)  # (n, c k k, L)
        out = weight.reshape(weight.shape[0], -1) @ cols  # (n, c_out, L)
        if bias is not None:
            out = out + bias[:, None]
        size = [(extent + 2 * p - d * (k - 1) - 1) // s + 1 for extent, p, d, k, s in
                zip((h, w), self.padding, self.dilation, self.kernel_size, self.stride)]
        out = out.reshape(n, out.shape[1], *size)
        return out.squeeze(0) if unbatched else out


def _convertible(module: nn.Module) -> bool:
    return (type(module) is nn.Conv2d and module.groups == 1 and module.padding_mode == "zeros"
            and not isinstance(module.padding, str))


def matmul_twin(model: nn.Module) -> nn.Module | None:
    """A copy of ``model`` whose plain 2-d convolutions compute by matrix products, with the same
    parameter names (so a functional call binds the same flat vector); None when it has none."""
    if not any(_convertible(m) for m in model.modules()):
        return None
    twin = copy.deepcopy(model)
    for parent in twin.modules():
        for name, child in list(parent.named_children()):
            if _convertible(child):
                child.__class__ = MatmulConv2d  # the same state, another forward
    return twin
