"""Precision modes of `sum` / `mean`: which strategy, which accumulator, which evaluation tree.

The contract of each mode is its error bound (precred.bounds); this table only says how it is met.
"""
from dataclasses import dataclass

import torch

from .strategies import COMPENSATED, PLAIN


@dataclass(frozen=True)
class Mode:
    name: str
    strategy: int             # strategies.PLAIN or strategies.COMPENSATED
    fp64_accumulator: bool    # accumulate in fp64 whatever the input (else fp32, or fp64 for fp64 input)
    whole_tree: bool          # every pass is a balanced tree over its part: the whole sum is one tree
    summary: str

    def accumulator_dtype(self, input_dtype: torch.dtype, out_dtype: torch.dtype | None = None) -> torch.dtype:
        """fp64 when the mode asks for it or when the input or the output is fp64, else fp32.

        torch.sum(x, dtype=d) casts x to d before summing; precred accumulates in at least d's
        precision too, but never rounds the inputs to a narrower dtype first."""
        if self.fp64_accumulator or torch.float64 in (input_dtype, out_dtype):
            return torch.float64
        # bf16 / fp16 / fp32 inputs: every mode accumulates in at least fp32.
        return torch.float32


MODES = {
    "fast": Mode("fast", PLAIN, False, False,
                 "fp32 accumulation (fp64 for fp64 input): lanes streamed, then a fixed tree"),
    "pairwise": Mode("pairwise", PLAIN, False, True,
                     "fp32 accumulation in a pairwise tree over the whole row: depth ~ log2(n)"),
    "kahan": Mode("kahan", COMPENSATED, False, False,
                  "compensated (TwoSum / Neumaier) fp32 accumulation: error ~ 1 rounding of the result"),
    "fp64": Mode("fp64", PLAIN, True, False,
                 "fp64 accumulation, rounded once to the output dtype"),
}

# The default is the same on every device: compensated summation costs little over `fast` and its
# error does not grow with n.
DEFAULT_MODE = "kahan"


def get_mode(mode: str) -> Mode:
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    return MODES[mode]
