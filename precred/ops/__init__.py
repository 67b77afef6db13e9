from .summation import sum, mean  # noqa: A004 -- precred.sum mirrors torch.sum on purpose
from .variance import std, std_mean, var, var_mean
from .exponential import log_softmax, logsumexp, softmax
from .extrema import amax, amin, argmax, argmin, max, min  # noqa: A004 -- mirror torch.max / torch.min
from .product import prod
from .normalization import layer_norm, rms_norm

__all__ = ["sum", "mean", "var", "std", "var_mean", "std_mean", "logsumexp", "softmax", "log_softmax", "amax", "amin", "max", "min",
           "argmax", "argmin", "prod", "layer_norm", "rms_norm"]
