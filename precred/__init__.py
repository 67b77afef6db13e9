"""precred: GPU reductions in Triton with selectable, bounded and measured precision.

On a machine without a CUDA device, precred runs its kernels through Triton's interpreter: it sets
TRITON_INTERPRET=1 before its kernels are defined, unless the variable is already set. On a machine
with a GPU, CPU tensors need TRITON_INTERPRET=1 set before import (and then run interpreted).
"""
import os

if "TRITON_INTERPRET" not in os.environ:
    import torch as _torch

    if not _torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"

from .bounds import (error_bound, gamma, logsumexp_error_bound, moments_error_bound,  # noqa: E402
                     norm_error_bound, product_error_bound, softmax_error_bound, unit_roundoff)
from .modes import (DEFAULT_EXP_MODE, DEFAULT_LOGSUMEXP_MODE, DEFAULT_MODE, DEFAULT_NORM_MODE, DEFAULT_PROD_MODE,  # noqa: E402
                    DEFAULT_VAR_MODE, EXP_MODES, MODES, NORM_MODES, PROD_MODES, VAR_MODES)
from .ops import (amax, amin, argmax, argmin, layer_norm, log_softmax, logsumexp, max, mean, min,  # noqa: E402,A004
                  prod, rms_norm, softmax, std, std_mean, sum, var, var_mean)
from . import nn  # noqa: E402
from .plan import Plan, plan_reduction  # noqa: E402

MODE_NAMES = tuple(MODES)

__all__ = ["sum", "mean", "var", "std", "var_mean", "std_mean", "logsumexp", "softmax", "log_softmax",
           "amax", "amin", "max", "min", "argmax", "argmin", "prod", "product_error_bound", "PROD_MODES",
           "DEFAULT_PROD_MODE", "layer_norm", "rms_norm", "norm_error_bound", "NORM_MODES", "DEFAULT_NORM_MODE", "nn",
           "error_bound", "moments_error_bound", "logsumexp_error_bound", "softmax_error_bound", "gamma",
           "unit_roundoff", "MODES", "MODE_NAMES", "DEFAULT_MODE", "VAR_MODES", "DEFAULT_VAR_MODE", "EXP_MODES",
           "DEFAULT_EXP_MODE", "DEFAULT_LOGSUMEXP_MODE", "Plan", "plan_reduction"]
__version__ = "0.1.0"
