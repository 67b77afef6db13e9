"""`precred.nn.LayerNorm` and `precred.nn.RMSNorm`: torch.nn's modules with precred's kernels.

Subclasses of torch.nn.LayerNorm / torch.nn.RMSNorm: the same constructor (plus `mode`), parameters
and state dict, and torch's repr plus `mode=...`, so a model can swap them in and load its checkpoints unchanged; only forward
differs (precred.layer_norm / precred.rms_norm).
"""
import torch

from .modes import DEFAULT_NORM_MODE, get_norm_mode
from .ops.normalization import layer_norm, rms_norm


class LayerNorm(torch.nn.LayerNorm):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None, *, mode: str = DEFAULT_NORM_MODE):
        get_norm_mode(mode)
        super().__init__(normalized_shape, eps, elementwise_affine, bias, device, dtype)
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps, mode=self.mode)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mode={self.mode!r}"


class RMSNorm(torch.nn.RMSNorm):
    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None, *, mode: str = DEFAULT_NORM_MODE):
        get_norm_mode(mode)
        super().__init__(normalized_shape, eps, elementwise_affine, device, dtype)
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.normalized_shape, self.weight, self.eps, mode=self.mode)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mode={self.mode!r}"
