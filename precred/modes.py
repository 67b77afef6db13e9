"""Precision modes of `sum` / `mean` and of `var` / `std`: which strategy, which accumulator, which tree.

The contract of each mode is its error bound (precred.bounds); this table only says how it is met.
"""
from dataclasses import dataclass

import torch

from .strategies import (CERTIFIED_EXP, COMPENSATED, EXACT, MAXIMUM, MAXIMUM_VALUE, MINIMUM, MINIMUM_VALUE, PLAIN,
                         PRODUCT, STABLE_EXP, WELFORD)


@dataclass(frozen=True)
class Mode:
    name: str
    strategy: int             # strategies.PLAIN, COMPENSATED, WELFORD, EXACT, ...
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
                  "compensated (TwoSum / Neumaier) fp32 accumulation: error ~ 1 rounding of the result "
                  "(bf16/fp16 input: fp64 accumulation, within the same bound; sum_mode)"),
    "fp64": Mode("fp64", PLAIN, True, False,
                 "fp64 accumulation, rounded once to the output dtype (16-bit outputs through fp32)"),
    "exact": Mode("exact", EXACT, True, False,
                  "correctly rounded (fp32/bf16/fp16): fp64 sum with a certified error bound, integer "
                  "superaccumulator for what it cannot certify"),
}

# dtypes the exact mode takes, as input and as output: the superaccumulator covers their exponent
# range in 16 limbs (fp64's would need 81) and the filter certifies roundings to them.
EXACT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# The default is the same on every device: compensated summation costs little over `fast` and its
# error does not grow with n.
DEFAULT_MODE = "kahan"


def _lookup(table: dict, mode, ops: str) -> Mode:
    if not isinstance(mode, str) or mode not in table:
        raise ValueError(f"mode must be one of {sorted(table)}{ops}, got {mode!r}")
    return table[mode]


def get_mode(mode: str) -> Mode:
    return _lookup(MODES, mode, "")


# 16-bit input whose kahan pair would be fp32 (any output but fp64) is summed by the fp64 mode: each
# element converts to fp64 exactly and the sum is plain fp64 accumulation. Its error, gamma^64_d S1 ~
# d 2^-53 S1 at depth d, is below the compensated fp32 pair's gamma_2d gamma_d S1 ~ 2 d^2 2^-48 S1 for
# every d >= 1, and both are rounded to the output alike (precred.bounds.error_bound: kahan's bound holds;
# tests/test_sum_accuracy.py asserts kahan's bound on this route, and that it dominates fp64's). On the
# GPUs measured it is also the faster of the two: a 16-bit element costs a conversion and one DADD
# there against the fp32 pair's TwoSum (~6 FADD), which kept kahan 1.11-1.15x fast's time. H200,
# bench/gpu_suite.py at 0377ad5 (one run), bf16 GB/s kahan / fp64 / fast: rows 1024x65536 3082 / 3166 /
# 3369, 8192^2 3119 / 3350 / 3394, 65536x1024 3207 / 3198 / 3450, 262144x256 3180 / 3331 / 3544, 2^28
# 3810 / 3951 / 3988; dim 0 1024x65536 2702 / 2843 / 2987, 8192^2 2712 / 2812 / 2950, 65536x1024 2480 /
# 2711 / 2840, 262144x256 2610 / 2699 / 2857 (16x262144, an 8 MiB call, 817 / 776 and 954 / 1035).
# fp64 output keeps the compensated fp64 pair, whose bound is tighter than plain fp64's.
def sum_mode(mode: str, dtype: torch.dtype, out_dtype: torch.dtype | None = None) -> Mode:
    """The Mode that runs `sum` / `mean`'s `mode` on `dtype` input into `out_dtype` (default dtype)."""
    found = get_mode(mode)
    if (found.name == "kahan" and dtype in (torch.bfloat16, torch.float16)
            and found.accumulator_dtype(dtype, out_dtype) == torch.float32):
        return MODES["fp64"]
    return found


# Modes of var / std / var_mean / std_mean: shifted Welford updates and Chan merges (strategies/welford.py)
# on the same schedules and plans as the sums; they differ in the accumulator dtype. Bounds:
# precred.bounds.moments_error_bound.
VAR_MODES = {
    "fast": Mode("fast", WELFORD, False, False,
                 "shifted Welford / Chan in fp32 (fp64 for fp64 input); fp32 rows of 256..8192 on chip: "
                 "shifted two-pass in registers"),
    "fp64": Mode("fp64", WELFORD, True, False,
                 "shifted Welford / Chan in fp64, rounded once: relative error ~0.5 ulp whatever the mean"),
}

# The default keeps the relative error of a fp32 variance at the final rounding whatever the mean's
# offset (moments_error_bound: the fp32 bound grows with the tree depth; the fp64 one stays ~2^-40 of it).
DEFAULT_VAR_MODE = "fp64"


def get_var_mode(mode: str) -> Mode:
    return _lookup(VAR_MODES, mode, " for var/std")


# Modes of logsumexp (and of softmax / log_softmax's reduction): the online (max, sum of exp) state
# (strategies/stable_exp.py), one pass over the data. Bounds: precred.bounds.logsumexp_error_bound.
EXP_MODES = {
    "fast": Mode("fast", STABLE_EXP, False, False,
                 "online max and sum of exp in fp32 (the GPU's approximate exp; fp64 for fp64 input)"),
    "fp64": Mode("fp64", STABLE_EXP, True, False,
                 "online max and sum of exp in fp64, log in fp64, rounded once: ~0.5 ulp"),
    # Where schedules/accurate_rows.py and accurate_columns.py do not run (anything but logsumexp of fp32
    # input over contiguous rows or a strided axis of 1024 or more under a contiguous one of 128 or more:
    # shorter or narrower strided axes, other dtypes, softmax / log_softmax), this mode runs the fp64
    # mode's numerics --
    # within its 2 ulp a fortiori (precred.bounds.logsumexp_error_bound; launch.reduce_logsumexp) --
    # except log_softmax's log(s): the split-tail pass (log_softmax_split_tail; through the single-read
    # and row-loop kernels in fp32 into bf16 / fp16, else in fp64; on the two-pass path the fp64
    # reduction, then schedules/split_tail.py), within 1.01 ulp of y even next to 0
    # (precred.softmax_error_bound).
    "accurate": Mode("accurate", STABLE_EXP, True, False,
                     "within 2 ulp (the fp64 mode's bound next to 0): fp32 exps of exact gaps summed in fp64 "
                     "with a bound per row, fp64 for the rows it cannot keep (fp32 rows and wide columns; the "
                     "fp64 mode elsewhere); log_softmax: the tail below the maximum summed apart, "
                     "log1p(tail) (fp32 into 16 bits on rows held on chip or looped, else fp64)"),
}

# The default meets "<= 2 ulp" for fp32 whatever the row: the fp32 mode's error is a few fp32 ulps of
# log(s), which is more than 2 ulps of the result when |result| is small.
DEFAULT_EXP_MODE = "fp64"
# logsumexp's default: `accurate` meets the same "<= 2 ulp" at 1.15-2.2x the fp64 mode's speed on
# contiguous fp32 rows (H200, plan.ACCURATE_ONE_TILE_MAX_ROW's note; schedules/accurate_rows.py), 1.5-1.6x
# over dim 0 of fp32 matrices of 1024 rows or more (plan.ACCURATE_COLUMNS_MIN_RED's note;
# schedules/accurate_columns.py), and is the fp64 mode everywhere else.
DEFAULT_LOGSUMEXP_MODE = "accurate"


def softmax_two_part_exp(acc_dtype: torch.dtype, out_dtype: torch.dtype, log: bool) -> bool:
    """Whether the single-read softmax kernel (schedules/single_read.py) takes its exponentials of
    x - m in two parts (strategies/stable_exp.py exp_two_part: within a few u whatever the gap) rather
    than of the rounded gap (3u |x - m| more, with the product by log2(e)): for softmax (not
    log_softmax, whose outputs are x - m - log(s)) with fp32 accumulators and an fp32 output. A 16-bit
    output hides the difference (a few fp32 ulps are ~2^-12 of a bf16 ulp), so it keeps the cheaper
    exponential. One place for the kernel (precred.launch) and the bound
    (precred.bounds.softmax_error_bound, single_read).

    Measured and not kept (H200, 2026-11-29, bench/exp_suite.py --ops softmax, fast fp32, GB/s of the
    same run before -> after): the normalizing pass (two-pass and row-loop rows) with the same
    exponential, its shift formed in fp32 as hi + lo (two TwoSums, log(s) split per row): worst error
    14-18 -> 2-8 ulp, but issue-bound there -- 262144x256 dim 0 2328 -> 1934, 16x262144 dim -1 1423 ->
    662, 1024x65536 dim 0 2567 -> 2467 (no spills; ~25 more instructions an element)."""
    return not log and acc_dtype == torch.float32 and out_dtype == torch.float32


def get_exp_mode(mode: str) -> Mode:
    return _lookup(EXP_MODES, mode, " for logsumexp/softmax/log_softmax")


# softmax's default into a bf16 / fp16 output is `fast`: its bound there (precred.softmax_error_bound:
# the fp32 pass's relative error, ~2^-15 at worst, is ~2^-7 of a bf16 ulp) is at most 1/16 ulp above
# the fp64 mode's, plus 2^-124 (fp32 terms and products below 2^-126 may be flushed) -- within 2 ulp,
# issue 4's default-mode goal -- while the fp64 mode's exponentials ran it at 0.45-0.9x Liger's speed
# on bf16 rows (H200, docs/logsumexp.md). tests/test_softmax.py asserts that claim over n, depth, s, t
# and the gap, and the outputs against mpmath. The other outputs keep
# DEFAULT_EXP_MODE: an fp32 output needs it for 2 ulp; log_softmax's x - lse cancels next to 0 (its
# error is fp32's absolute error of lse, many 16-bit ulps of a y near 0), and so does logsumexp's
# m + log(s).
SOFTMAX_16BIT_DEFAULT_MODE = "fast"


# log_softmax's default into a bf16 / fp16 output is `accurate`: through the single-read and row-loop
# kernels it is the split-tail fp32 pass (log_softmax_split_tail), whose bound there
# (precred.softmax_error_bound) stays within 1.01 ulp -- the output's rounding, counted as u |y|, and
# ~500 fp32 u of y -- where fast's and torch's fp32 log(s) lose the tail next to y = 0 (torch: bf16
# log_softmax of [0, -30] is 0, not -9.3e-14); on the two-pass path the fp64 reduction and the fp64
# split-tail kernel (within the same 1.01 ulp). The fp64 mode's
# exponentials ran bf16 rows at 0.61-0.78x torch's speed (H200, docs/logsumexp.md at bb39344).
# tests/test_softmax.py asserts the bound's premise and the outputs.
LOG_SOFTMAX_16BIT_DEFAULT_MODE = "accurate"


def softmax_mode(mode: str | None, out_dtype: torch.dtype, log: bool) -> str:
    """The mode softmax (or log_softmax, `log`) runs for `mode` into out_dtype: `mode` itself, or for
    None (the default) into bf16 / fp16 SOFTMAX_16BIT_DEFAULT_MODE (softmax) or
    LOG_SOFTMAX_16BIT_DEFAULT_MODE (log_softmax), else DEFAULT_EXP_MODE."""
    if mode is not None:
        get_exp_mode(mode)
        return mode
    if out_dtype in (torch.bfloat16, torch.float16):
        return LOG_SOFTMAX_16BIT_DEFAULT_MODE if log else SOFTMAX_16BIT_DEFAULT_MODE
    return DEFAULT_EXP_MODE


def log_softmax_split_tail(mode: str, input_dtype: torch.dtype, out_dtype: torch.dtype, log: bool) -> torch.dtype | None:
    """The accumulator of log_softmax's split-tail pass in `mode` from input_dtype into out_dtype where
    the single-read and row-loop kernels run it (schedules/single_read.py, row_loop.py: SPLIT_TAIL;
    precred.launch.softmax_rows), or None where no split-tail pass runs (softmax; the `fast` and fp64
    modes). The pass keeps the sum of the terms below the row's maximum apart, so that log(s) =
    log1p(tail) keeps its relative error next to s = 1, where y = x - m - log(s) is next to 0: `accurate`
    only -- in fp32 (scaled terms) into a bf16 / fp16 output from anything but fp64, else in fp64. The
    two-pass path (rows too long for either kernel, strided rows beyond the single-read limit) runs the
    fp64 reduction, then the split-tail kernel in fp64 (schedules/split_tail.py) for rows whose s <
    1.5. Not the fp64 mode itself: the second fp64 sum cost its single-read kernel 13-15% more
    instructions (sm_90: fp32 rows of 256 / 1024, 976 / 896 -> 1120 / 1016; rows of 8192 116 -> 296
    bytes spilled), and that kernel is issue-bound (log_softmax's fp32 default; 0.85-0.87x torch).
    (Measured with two trees, s and the tail; the fp64 accumulator's single-read kernel now sums one
    tree and counts the maxima: split_tail_counts_maxima.)"""
    if not log or mode != "accurate":
        return None
    if out_dtype in (torch.bfloat16, torch.float16) and input_dtype != torch.float64:
        return torch.float32
    return torch.float64


def split_tail_counts_maxima(acc_dtype: torch.dtype) -> bool:
    """Whether the single-read kernel's split-tail pass in acc_dtype (schedules/single_read.py,
    COUNT_MAXIMA) sums one tree, of the tail, and counts the row's maxima (s = c + tail in fp64) rather
    than summing two trees, s and the tail: for the fp64 accumulator only. One place for the kernel
    (precred.launch) and the bound (precred.bounds.softmax_error_bound, single_read).
    H100, 2026-12-06, bench/sweep_outer.py --op log_softmax --modes accurate --dim -1, GB/s of the
    input, two runs, two trees -> the count on every accumulator: fp64 (fp32 rows) 8192^2 565 / 565 ->
    613 / 613, 65536x1024 1177 / 1175 -> 1356 / 1356 (sm_90: rows of 8192 spill 296 -> 276 bytes, rows
    of 1024 108 -> 96 registers); fp32 (bf16 rows) 8192^2 1162 -> 826, 4096^2 1032 -> 716, rows of 16
    over dim 0 (16x262144) 670 -> 603, the rest within 2% (sm_90, rows of 8192: 184 -> 168 registers
    but 1064 -> 1256 instructions, the row's load mask kept as packed bits beside the count). With the
    count for fp64 only, same protocol, one run: fp32 8192^2 611, 65536x1024 1351; bf16 8192^2 1151,
    4096^2 1027, 16x262144 over dim 0 638 (664 in that run before cc7ac7e, whose strided rows summed both
    trees as one tree of pairs: sm_90 SASS of the same length, 2616 instructions, and the same count of
    each opcode, registers allocated apart -- one run each, not resolved)."""
    return acc_dtype == torch.float64


# How logsumexp's fp64 mode runs on bf16 / fp16 inputs: the fp32 pass (fast's numerics, on the fp32
# pipe) with a bound that certifies the rounding of most outputs to 16 bits -- those are the exact
# result correctly rounded -- then fp64 for the outputs it cannot certify (schedules/recompute.py).
# The fp64 pipe made the plain fp64 pass compute-bound on 16-bit data (H100: 2.0-2.7x torch against
# fast's 3.9-7.1x, docs/logsumexp.md at 75af2ee). Within the fp64 mode's bound either way
# (precred.bounds.logsumexp_error_bound).
CERTIFIED_EXP_MODE = Mode("fp64 (certified fp32 pass)", CERTIFIED_EXP, False, False,
                          "fp32 online max and sum of exp; roundings its bound certifies, fp64 for the rest")


def logsumexp_mode(mode: str, dtype: torch.dtype) -> Mode:
    """The Mode that runs logsumexp's `mode` on `dtype` input (the output has x's dtype): on bf16 / fp16
    the fp64 mode and the accurate one (which is the fp64 mode's numerics there) take the certified
    fp32 pass."""
    found = get_exp_mode(mode)
    if found.name in ("fp64", "accurate") and dtype in (torch.bfloat16, torch.float16):
        return CERTIFIED_EXP_MODE
    return found


# max / min / argmax / argmin (with indices, strategies/extremum.py) and amax / amin (values alone,
# strategies/extremum_value.py): exact whatever the order, so there is no precision to choose; these
# internal modes only select the direction and whether an index is kept. The accumulator holds the
# input dtype exactly (fp32 for 16-bit inputs).
MAXIMUM_MODE = Mode("maximum", MAXIMUM, False, False, "the largest element and its first index (exact)")
MINIMUM_MODE = Mode("minimum", MINIMUM, False, False, "the smallest element and its first index (exact)")
# amax / amin: the value alone (strategies/extremum_value.py), IEEE 754-2019 maximum / minimum.
MAXIMUM_VALUE_MODE = Mode("maximum value", MAXIMUM_VALUE, False, False, "the largest element (exact; +0.0 > -0.0)")
MINIMUM_VALUE_MODE = Mode("minimum value", MINIMUM_VALUE, False, False, "the smallest element (exact; -0.0 < +0.0)")

# Modes of prod (strategies/product.py). Bound: precred.bounds.product_error_bound.
PROD_MODES = {
    "fast": Mode("fast", PRODUCT, False, False,
                 "fp32 products (fp64 for fp64 input): relative error <= gamma_(n-1), fp32's range"),
    "fp64": Mode("fp64", PRODUCT, True, False,
                 "fp64 products rounded once: ~0.5 ulp for fp32 output, fp64's range"),
}

# The default rounds once for 32/16-bit outputs (the fp64 product's relative error is ~n * 2^-53 before
# that rounding), and fp64's exponent range (8x fp32's) keeps partial products of fp32 factors normal
# where an fp32 accumulator would overflow or underflow before the result is back in range.
DEFAULT_PROD_MODE = "fp64"


def get_prod_mode(mode: str) -> Mode:
    return _lookup(PROD_MODES, mode, " for prod")


# Modes of layer_norm / rms_norm (precred/schedules/norm_rows.py, norm_stream.py): the accumulator of
# the row statistics and of the output's arithmetic. Both shift each row by one of its elements before
# summing, so neither loses accuracy to a large mean. Bounds: precred.bounds.norm_error_bound.
NORM_MODES = {
    "fast": Mode("fast", WELFORD, False, False,
                 "fp32 statistics and arithmetic (fp64 for fp64 input): a few ulps of O(1) outputs, any mean"),
    "precise": Mode("precise", WELFORD, True, False,
                    "fp64 statistics and arithmetic, rounded once (the last steps, * w + b, in fp32 for 16-bit "
                    "outputs; for 16-bit input and output the mean in fp64, the rest in fp32 around it): "
                    "~0.5 ulp of each output plus ~2^-45 of |w| (16-bit: plus 2^-47 |mean| / std of |w|)"),
}


def norm_affine_dtype(accumulator: torch.dtype, out_dtype: torch.dtype, parameter_dtypes=()) -> torch.dtype:
    """The dtype of layer_norm / rms_norm's last steps, y = xhat * w + b: the accumulator's, except fp32
    where an fp64 accumulator feeds a 16-bit output and no parameter is fp64 (they convert to fp32
    exactly): three fp32 roundings (2^-24 each) stay far below the output's (2^-9 for bf16) and save
    the GPU's fp64 <-> fp32 conversions (16 a clock per SM on sm_80 / sm_90: converting w, b and y per
    element made the precise bf16 forward conversion-bound)."""
    if (accumulator == torch.float64 and out_dtype in (torch.bfloat16, torch.float16)
            and torch.float64 not in parameter_dtypes):
        return torch.float32
    return accumulator

# The default is the mode a training step can afford everywhere; `precise` is for reference outputs.
DEFAULT_NORM_MODE = "fast"


def get_norm_mode(mode: str) -> Mode:
    return _lookup(NORM_MODES, mode, " for layer_norm/rms_norm")
