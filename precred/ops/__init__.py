from .summation import sum, mean  # noqa: A004 -- precred.sum mirrors torch.sum on purpose
from .variance import std, std_mean, var, var_mean
from .exponential import log_softmax, logsumexp, softmax

__all__ = ["sum", "mean", "var", "std", "var_mean", "std_mean", "logsumexp", "softmax", "log_softmax"]
