"""`atomic` schedule: extrema of few long rows merged by integer atomics instead of a second pass.

Only for the extremum strategy (strategies/extremum.py), whose merge is order-free: the result does not
depend on which program's atomic lands first, so it is bitwise deterministic, and equal to what the
`inner` / `split` schedules return.

A program streams its part of BLOCK_M rows exactly as the inner schedule does (tile-shaped (v, index)
lanes, one fixed tree at the end), then packs each row's winner into one int64 key whose integer order
is the extremum's order and merges it with `atomic_max` into the row's key (initialized to INT64_MIN):
* high 32 bits: the fp32 value (16-bit inputs widen exactly) mapped to an int32 that sorts like the
  float (negative floats have their magnitude bits flipped), with -0.0 mapped to +0.0's key (they tie,
  as in the order) and every NaN to the largest key (NaN is above every number; NaNs tie);
* low 32 bits: 2^32 - 1 - index, so among equal values the smaller index has the larger key.
Rows of at most 2^32 elements, fp32/bf16/fp16 only (an fp64 value does not fit beside an index).
A finishing launch unpacks the index and copies the element at that index from the input, bit for bit
(its sign of zero and NaN payload are the input's), as the value, and leaves every key at INT64_MIN
again: a CUDA call's launch recipe reuses the keys, per stream, with no fill launch.

Bytes moved: every input element once; 8 bytes per row and program (atomics), then one element and one
index per row.
"""
import triton
import triton.language as tl

from .grid import block_indices
from .inner import program_rows
from .steps import accumulate_tile, finished_index, initial_state, lane_positions
from .tree import tree_reduce_last_axis

INDEX_MASK = tl.constexpr(0xFFFFFFFF)
KEY_EMPTY = tl.constexpr(-(2 ** 63))   # INT64_MIN: below every key, what the keys hold between calls


@triton.jit
def extremum_key(v, index):
    """The int64 key of an oriented fp32 value and its index (see the module docstring)."""
    bits = v.to(tl.int32, bitcast=True)
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)   # sorts as the float does, -0.0 just below +0.0
    ordered = tl.where(v == 0.0, 0, ordered)       # -0.0 ties with +0.0
    ordered = tl.where(v != v, 0x7FFFFFFF, ordered)
    return (ordered.to(tl.int64) << 32) | (INDEX_MASK - index)


@triton.jit
def atomic_extremum_kernel(
    src_ptr,       # input elements (bf16 as int16 bits)
    key_ptr,       # int64 [n_rows], INT64_MIN on entry: the packed winners
    n_rows, inner_size,
    stride_outer, stride_inner, stride_red,  # element strides of the source
    red_len, chunk_len, n_parts,
    STRATEGY: tl.constexpr,       # strategies.MAXIMUM or MINIMUM
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    rows, row_mask, row_base, _, part_start, part_end = program_rows(
        n_rows, inner_size, stride_outer, stride_inner, red_len, chunk_len, n_parts, BLOCK_M)

    v, lo, index = initial_state(BLOCK_M, BLOCK_N, tl.float32, STRATEGY, False)
    lanes = tl.arange(0, BLOCK_N)
    ptrs = src_ptr + row_base[:, None] + (part_start + lanes)[None, :] * stride_red
    step = tl.full((), BLOCK_N, tl.int64) * stride_red
    for start in range(part_start, part_end, BLOCK_N):
        mask = row_mask[:, None] & ((start + lanes) < part_end)[None, :]
        v, lo, index = accumulate_tile(v, lo, index, ptrs, ptrs, ptrs, mask, start - part_start, 0.0, 1.0,
                                       0.0, tl.float32, STRATEGY, False, False)
        ptrs += step
    index = lane_positions(index, lanes[None, :], row_mask[:, None] & ((part_start + lanes) < part_end)[None, :],
                           STRATEGY, False)
    row_v, _, row_index = tree_reduce_last_axis(v, lo, index, BLOCK_M, BLOCK_N, STRATEGY)
    row_index = finished_index(row_index, part_start, STRATEGY, False)
    # A part of only padding (none here: parts cover the row) would keep INDEX_NONE; masked rows skip.
    tl.atomic_max(key_ptr + rows, extremum_key(row_v, row_index), mask=row_mask)


@triton.jit
def atomic_finish_kernel(
    src_ptr,       # input elements (any dtype: copied bit for bit)
    key_ptr,       # int64 [n_rows]: the packed winners; left at INT64_MIN
    values_ptr,    # [n_rows], the input's dtype
    index_ptr,     # int64 [n_rows] (WITH_INDEX)
    n_rows, inner_size, stride_outer, stride_inner, stride_red,
    WITH_INDEX: tl.constexpr, BLOCK: tl.constexpr,
):
    rows = block_indices(tl.program_id(0), BLOCK, n_rows)
    mask = rows < n_rows
    index = INDEX_MASK - (tl.load(key_ptr + rows, mask=mask, other=0) & INDEX_MASK)
    tl.store(key_ptr + rows, tl.full([BLOCK], KEY_EMPTY, tl.int64), mask=mask)   # ready for the next call
    row_base = (rows // inner_size).to(tl.int64) * stride_outer + (rows % inner_size).to(tl.int64) * stride_inner
    tl.store(values_ptr + rows, tl.load(src_ptr + row_base + index * stride_red, mask=mask), mask=mask)
    if WITH_INDEX:
        tl.store(index_ptr + rows, index, mask=mask)
