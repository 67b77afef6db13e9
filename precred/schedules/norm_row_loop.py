"""layer_norm / rms_norm forward over contiguous rows too long for registers but short enough for L2:
one program per row reads it twice in one launch -- the Welford statistics over the row, then the
normalizing loop, last tile first, for what L2 still holds of the row (the rows in flight at once are
larger than L2: see pass 2). The streaming path (schedules/norm_stream.py) reads it twice from HBM: a
Welford reduction launch, then norm_apply_kernel.

Numerics are the streaming path's, fused: the statistics are the fp64 Welford state of the row shifted
by its first element (0 if not finite), streamed in BLOCK_N lanes and merged by the fixed tree -- the
inner schedule's single part, as precred.launch.reduce_moments computes it with VAR_MODES["fp64"] --
finished as finish_moments / finish_mean do (biased variance; NaN where the mean is not finite), turned
into mean and rstd by norm_stream.row_statistics, and the normalizing pass is norm_apply_kernel's
(normalized_chunk, store_affine). The bits of the statistics may differ from the streaming path's
(other lanes, other merge order), the bound does not: precred.bounds.norm_error_bound's streaming rows
(moments_error_bound at depth n covers every order).
"""
import triton
import triton.language as tl

from .finish import finish_mean, finish_moments, to_accumulator
from .norm_rows import normalized_chunk, store_affine
from .norm_stream import row_statistics
from .steps import accumulate_tile, row_shift
from .tree import tree_reduce_last_axis
from ..strategies import welford_lane_counts

_WELFORD = tl.constexpr(2)   # strategies.WELFORD


@triton.jit
def norm_row_loop_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, eps: tl.float64,
                         RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC_DTYPE: tl.constexpr,
                         AFFINE_DTYPE: tl.constexpr, BLOCK_N: tl.constexpr, LOOP_STAGES: tl.constexpr):
    # x, y: [n_rows, n_cols] contiguous; w, b: [n_cols]; mean, rstd: [n_rows] fp64, written; one program
    # per row. eps: fp64 (annotated). LOOP_STAGES: the loops' software pipelining (tiles of x in
    # flight while one is folded: a plain loop waits out each tile's load, with a few KB in flight per
    # program).
    row = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, BLOCK_N)
    row_start = x_ptr + row * n_cols
    shift = row_shift(row_start, True, tl.float64)   # a finite shift, else 0
    # Pass 1: (mean, m2) of x - shift per lane in fp64, lane j taking elements j, j + BLOCK_N, ...
    mean = tl.zeros([1, BLOCK_N], tl.float64)
    m2 = tl.zeros([1, BLOCK_N], tl.float64)
    tiles = tl.zeros((), tl.float64)   # k: the tile's number, counted from 1 (steps.tile_weights' k)
    for start in tl.range(0, n_cols, BLOCK_N, num_stages=LOOP_STAGES):
        mask = ((start + lanes) < n_cols)[None, :]
        tiles += 1.0
        reciprocal, complement = 1.0 / tiles, (tiles - 1.0) / tiles
        ptrs = row_start + (start + lanes)[None, :]
        mean, m2, _ = accumulate_tile(mean, m2, m2, ptrs, ptrs, ptrs, mask, 0, shift, reciprocal, complement,
                                      tl.float64, _WELFORD, False, False)
    count = welford_lane_counts(0, n_cols, lanes, BLOCK_N)[None, :]
    shifted_mean, row_m2, _ = tree_reduce_last_axis(mean, m2, count, 1, BLOCK_N, _WELFORD)
    var = finish_moments(row_m2, shifted_mean, n_cols, False, tl.float64)
    mean, rstd = row_statistics(var, finish_mean(shifted_mean, shift, tl.float64), eps, RMS)
    first_lane = tl.arange(0, 1)
    tl.store(mean_ptr + row + first_lane, mean)
    tl.store(rstd_ptr + row + first_lane, rstd)
    # Pass 2: y = (x - mean) * rstd * w + b, the row read again, from its last tile to its first: the
    # tiles pass 1 read last are the likeliest still in L2. H100, 2026-11-26 (ncu: front to back read
    # 539 MB from HBM for 256 MB of fp32 1024x65536 -- no hit; GB/s of input + output, front -> back):
    # layer_norm fp32 1024x65536 1891 -> 1950, rms_norm 1902 -> 1973, bf16 1587 -> 1641 / 1631 -> 1710;
    # 512x65536 fp32 +3-4%, bf16 layer_norm even, rms_norm +2%. (softmax's row loop lost 1-3% with it.)
    y_start = y_ptr + row * n_cols
    n_tiles = tl.cdiv(n_cols, BLOCK_N)
    for t in tl.range(0, n_tiles, num_stages=LOOP_STAGES):
        cols = (n_tiles - 1 - t) * BLOCK_N + lanes
        col_ok = cols < n_cols
        x = to_accumulator(tl.load(row_start + cols[None, :], mask=col_ok[None, :], other=0), ACC_DTYPE)
        xhat = normalized_chunk(x, mean[:, None], rstd[:, None], RMS, ACC_DTYPE)
        store_affine(xhat, w_ptr, b_ptr, y_start, cols[None, :], cols, col_ok, col_ok[None, :], HAS_W, HAS_B,
                     AFFINE_DTYPE)
