"""logsumexp's `accurate` mode over contiguous fp32 rows: fp32 exponentials of exact gaps, fp64 sums,
and per row an a-posteriori bound that either keeps the fp32 result (within 2 ulp of the exact one) or
has the row redone in fp64: held rows (a tile a program) by the same program (_finish_in_fp64, flag 2),
streamed rows by the fp64 recompute (schedules/recompute.py exp_recompute_kernel, which reads the flags).

Why: the fp64 mode's libdevice exp runs ~61 sm_90 instructions an element, issue-bound at ~1.6 TB/s on
an H200; `fast`'s loop takes ~14 but its error (a rounded gap times log2(e), fp32 sums, a rescaling exp
per merge) is several fp32 ulps of log(s), more than 2 ulp of a small result. Here each element costs a
TwoSum, ~6 fp32 flops, one MUFU exp, a widening and an fp64 addition.

Numerics (u = 2^-24, c = precred.bounds.ACCURATE_EXP_ERROR_UNITS: exp_of_exact_gap's relative error):
* A term exp(x - ref) is formed from the exact gap hi + lo = x - ref (TwoSum), so it is within c u of
  the exact term whatever the gap (the fast mode's rounded gap costs 3u |x - ref| more).
* Rows held in one tile (ONE_TILE): ref is the row's maximum M (exact), so every term is one such exp,
  widened to fp64 (exact) and summed in fp64: by the blocked tree (tree.tree_sum_blocked_rows), or,
  for rows held in pieces (PIECES, rows of up to plan.ACCURATE_PIECES_MAX_ROW), by tl.sum over each
  piece and then over the pieces (the plan's fp64_depth bounds any order of these).
* Longer rows stream: each thread is a lane keeping (s fp64, m fp32, r fp32) over its elements of
  every tile. Per tile, m' = max(m, the thread's new elements), the new terms against m', and the old s
  rescaled by f = exp(m - m') from the exact gap too -- exactly 1 when m did not move, which after a
  row's first tiles is almost always -- and each f != 1 adds the mass it rescaled, s f, to r. At the
  end the lanes merge against the row's maximum M by fp64 exps (libdevice, 4 u_64 each), s and r alike.
  An element's term therefore carries c u for its own exp and c u per rescale it went through after it,
  and the rescales' masses add up to r: |S_hat - S| <= c u (S + R) to first order, S the exact sum of
  exp(x - M) (>= 1: the maximum's own term) and R the rescaled mass. Beyond first order, a term through
  k exps is within (1 + c u)^k - 1 <= k c u / (1 - k c u), k at most the tiles + 1: the host pads c u
  by 1 / (1 - (tiles + 2) c u), and by 1 + 2 gamma_depth (fp32) for r's own roundings.
* fp64 roundings: an element's path has at most `depth` fp64 operations (the plan's, precred.plan.
  AccurateExpPlan.fp64_depth), gamma_depth of S; exps below 2^-126 are flushed to 0: at most 2 n 2^-126
  of S (a term and a rescale per element at most). The host passes both as `fp64_slack`.
So rho = c u (1 + R / S) (1 + 2^-10) + fp64_slack (R / S from the computed values, in fp32: the padding
covers their relative errors, far below 2^-10) bounds |S_hat - S| / S to first order, 1 / (1 - 2 rho)
pads the second; log(S_hat) is within rho / (1 - rho) of log(S); both within rho (1 + 16 rho) for
rho <= 1/8; libdevice's fp64 log and the sum M + log(S) add 2^-50 (|log S| + |lse|): the exact result is
within e of lse_hat (fp64).

Certificate (within_two_ulp32): the output fl32(lse_hat) is kept where |fl32(lse_hat) - lse_hat| + e is
at most 2 ulp of every value within e of lse_hat -- the fp32 spacing at the smallest magnitude in that
interval -- so the output is within 2 ulp of the exact result (issue 4's goal for the default mode);
results near 0 (|lse| below ~2, where 1.5 ulp is below e) are flagged and recomputed in fp64, as are
results that would overflow fp32 (the fp64 mode's bound, within 2 ulp but for results within ~1e-7 of
0). Non-finite results are the specials' and kept as they are. A flagged row's output holds its maximum
M (finite there) until the recompute overwrites it: the recompute's reference.

Specials, without branches: every element is clamped to [lower, upper] by a NaN-propagating clamp (below,
lower is at least 256 under ref, so a clamped term flushes to 0, exactly as exp(-inf) -- or the term of
any gap beyond -256 -- would; above, upper = ref + 1 binds only against an infinite maximum), so no
infinity enters a TwoSum; ref is the maximum, or 0 where that is infinite. A +inf element thus adds a
finite term and its row's maximum makes lse = inf + log(S) = +inf; a row of -inf keeps S = 0 and lse =
-inf; a NaN element makes S NaN (the clamp keeps it), so lse is NaN -- torch's answers. Padding lanes
load -inf.
"""
import triton
import triton.language as tl

from ..strategies.compensated import two_sum
from ..strategies.stable_exp import exp_of_exact_gap
from .grid import block_indices
from .recompute import recompute_rows
from .steps import programmatic_launch_points
from .tree import tree_sum_blocked_rows

_TERM_FLOOR = tl.constexpr(256.0)   # a gap below -256 gives a term below 2^-369: flushed to 0


@triton.jit
def _reference(m, above):
    """(ref, lower, upper): the reference the terms are taken against -- m itself, or 0 where m is
    infinite (no inf - inf) -- and the clamp of the elements against it: lower at least 256 below ref
    whatever its magnitude (ref - 256 itself rounds to ref once |ref| >= 2^33), but not below -FLT_MAX;
    upper ref + above, which the caller sets above every finite element's gap (here the maximum: 1;
    accurate_columns.py's lagging reference: 16), so that it binds only against an infinite reference.
    A reference within 2^-10 of -FLT_MAX is the one case where lower is not 256 below ref: there
    -inf elements count as -FLT_MAX, whose terms are at most 1 -- S grows by a factor n at most, log(n) <
    22, while the fp32 spacing there is 2^104: the result rounds as the exact one does."""
    ref = tl.where(tl.abs(m) == float("inf"), 0.0, m)
    lower = tl.maximum(ref - tl.maximum(_TERM_FLOOR, tl.abs(ref) * 0.0009765625), -3.4028234663852886e38)  # 2^-10
    return ref, lower, ref + above


@triton.jit
def _terms(x, ref, lower, upper):
    """exp(x - ref) of exact gaps, x clamped to [lower, upper] (_reference)."""
    clamped = tl.clamp(x, lower, upper, propagate_nan=tl.PropagateNan.ALL)
    hi, lo = two_sum(clamped, -ref)
    return exp_of_exact_gap(hi, lo)


@triton.jit
def within_two_ulp32(value, lse, e):
    """Whether fp32 `value` is within 2 ulp of every fp64 value in [lse - e, lse + e] (fp64 lse, e):
    |value - lse| + e against twice the fp32 spacing at the interval's smallest magnitude (2^-149 where
    it holds 0 or subnormals), padded by 2^-40 for the fp64 roundings of the check."""
    below = lse - e
    above = lse + e
    # (lowered by 2^-48: the computed ends may lie a rounding beyond the true ones, and a power of two
    # between them would double the spacing)
    nearest = tl.where((below <= 0.0) & (above >= 0.0), 0.0,
                       tl.minimum(tl.abs(below), tl.abs(above)) * (1.0 - 3.552713678800501e-15))
    exponent = ((nearest.to(tl.int64, bitcast=True) >> 52) & 0x7FF) - 1023
    exponent = tl.maximum(exponent, -126)
    ulp = ((exponent - 23 + 1023) << 52).to(tl.float64, bitcast=True)
    worst = tl.abs(value.to(tl.float64) - lse) + e
    return worst <= 2.0 * ulp * (1.0 - 9.094947017729282e-13)


@triton.jit
def _finish(dst_ptr, flags_ptr, rows, row_ok, big, total, rescaled, exp_error, fp64_slack,
            RESCALED: tl.constexpr = True):
    """Write each row's fp32 result and flag from its maximum `big` and (S, R) in fp64 (module docstring)
    -- where the bound does not keep the result, `big` itself: the row's maximum, which the fp64
    recompute takes as its reference (schedules/recompute.py; accurate_columns.py's columns pass their
    lagging reference, which their own recompute never reads); the flags (true where kept) are
    returned too. RESCALED False: R is 0 (held rows; `rescaled` unread),
    so the bound takes no division."""
    log_s = tl.log(total)
    lse = big.to(tl.float64) + log_s
    # The bound in fp32, rounded up by its padding (each thread computes it for each row it holds, so
    # it is kept short): rho = c u (1 + R / S) + slack, then rho / (1 - 2 rho) and the log's
    # rho / (1 - rho) together within rho (1 + 16 rho) for rho <= 1/8 (rows beyond are not kept).
    if RESCALED:
        rho = exp_error * (1.0 + rescaled.to(tl.float32) / total.to(tl.float32)) * (1.0 + 1.0 / 1024) + fp64_slack
    else:
        rho = exp_error * (1.0 + 1.0 / 1024) + fp64_slack + tl.zeros(total.shape, tl.float32)
    rho64 = rho.to(tl.float64)
    e = rho64 * (1.0 + 16.0 * rho64) * (1.0 + 9.094947017729282e-13) + 8.881784197001252e-16 * (
        tl.abs(log_s) + tl.abs(lse))   # padded by 2^-40 for its own fp64 roundings; 2^-50 (|log S| + |lse|)
    value = lse.to(tl.float32)
    kept = within_two_ulp32(value, lse, e) & (rho <= 0.125)
    kept = kept | (lse != lse) | (tl.abs(lse) == float("inf"))
    tl.store(dst_ptr + rows, tl.where(kept, value, big), mask=row_ok)
    tl.store(flags_ptr + rows, kept.to(tl.int8), mask=row_ok)
    return kept


@triton.jit
def _finish_in_fp64(src_ptr, stride_row, n_rows, rows, unkept, red_len, dst_ptr, flags_ptr, BLOCK_N: tl.constexpr,
                    LANES: tl.constexpr):
    """Held rows: the rows `unkept` (their bound did not keep the fp32 result; _finish left their
    maximum, finite there, in dst) finished in fp64 by the program that holds them, by the fp64
    recompute's own code (schedules/recompute.py recompute_rows, unchunked): one fp64 exponential a
    term against the row's maximum, added along each of LANES lanes over the row's tiles (read again:
    from L2, just loaded), then by the fixed lane tree (depth precred.plan.AccurateExpPlan.finish_depth)
    -- written with flag 2. Nothing runs where every row was kept (ordinary data): one reduction of
    the flags. The tiles are loaded anew rather than kept from the first pass, which would hold the
    row's elements through the finish's fp32 bound and raise the kernel's registers on the path every
    call takes."""
    if tl.max(unkept.to(tl.int32), 0) > 0:
        # _finish's stores to these rows came from other threads (the first pass's layout): a CTA
        # barrier orders them before the reads of the maxima and the stores here, which must be the last
        tl.debug_barrier()
        # every row of the program is read (the kept ones' sums unused): recompute_rows' own masks
        recompute_rows(rows, unkept, 0, 0, red_len, src_ptr, dst_ptr, dst_ptr, flags_ptr, n_rows, 1, stride_row, 0,
                       1, 1, False, unkept.shape[0], LANES, LANES >= BLOCK_N, 1)   # no chunks: no scratch touched
        tl.store(flags_ptr + rows, tl.full(rows.shape, 2, tl.int8), mask=unkept)


@triton.jit
def _merged(m, s, r):
    """(maximum, S, R) of states (m, s, r) merged against their maximum by fp64 exps (exactly 1 for the
    maximum's own; a state of -inf under a finite maximum gets 0, and one under +inf too)."""
    big = tl.max(m, 0)
    g = tl.where(m == big, 1.0, tl.exp(m.to(tl.float64) - big.to(tl.float64)))
    return big, tl.sum(s * g, 0), tl.sum(r.to(tl.float64) * g, 0)


@triton.jit
def accurate_logsumexp_kernel(src_ptr, dst_ptr, flags_ptr, part_m_ptr, part_s_ptr, part_r_ptr, arrivals_ptr,
                              n_rows, red_len, stride_row, chunk_len, n_parts, exp_error, fp64_slack,
                              BLOCK_ROWS: tl.constexpr, BLOCK_N: tl.constexpr, ONE_TILE: tl.constexpr,
                              LOOP_STAGES: tl.constexpr, TREE_VEC: tl.constexpr, TREE_THREADS: tl.constexpr,
                              BLOCK_PARTS: tl.constexpr, LAUNCH_DEPENDENTS: tl.constexpr,
                              FULL_TILES: tl.constexpr = False, PIECES: tl.constexpr = 1,
                              FINISH_LANES: tl.constexpr = 0):
    """logsumexp of n_rows contiguous fp32 rows of red_len (row r at r * stride_row): dst the fp32
    results, flags 1 where within_two_ulp32 keeps them (module docstring), 0 where the recompute must
    redo them. exp_error: c u; fp64_slack: the fp64 roundings' and flushed terms' share of rho.
    ONE_TILE: each program holds BLOCK_ROWS whole rows (red_len <= BLOCK_N); else one row a program,
    streamed in tiles of BLOCK_N, a lane per thread (TREE_VEC-element vectors, TREE_THREADS threads) --
    or, with BLOCK_PARTS > 0 (few long rows), n_parts programs a row, each over chunk_len elements
    (whole tiles): each stores its part's (m, S, R) ([n_rows, n_parts] fp64 scratch) and counts itself
    in on the row's int32 counter (zero on entry, left zero); the last to arrive merges the row's parts
    (_merged: an order of the parts, not of their arrival) and finishes the row. FULL_TILES (ONE_TILE
    alone; the launcher's promise that BLOCK_N == red_len and BLOCK_ROWS divides n_rows) loads the
    tile unmasked. PIECES > 1 (ONE_TILE): the held tile is taken as [BLOCK_ROWS, PIECES, BLOCK_N /
    PIECES] -- each row in PIECES consecutive pieces --, which Triton lays out with a piece's columns
    across a few threads and the rows across the others, so that each thread holds every piece of one
    row and finishes that row alone: the finish (the fp64 log, the bound) is issued once for as many
    rows as a warp holds, where on the [BLOCK_ROWS, BLOCK_N] tile every thread holds a part of every
    row and finishes each. Its sum: over each piece, then over the pieces (tl.sum's orders; depth at
    most BLOCK_N / PIECES + PIECES - 2). FINISH_LANES > 0 (ONE_TILE): the rows the bound does not keep
    are finished in fp64 by the same program (_finish_in_fp64; flag 2), so that nothing is left to the
    recompute launch."""
    programmatic_launch_points(LAUNCH_DEPENDENTS, False)   # the recompute may start; it waits for our writes
    pid = tl.program_id(0)
    if BLOCK_PARTS > 0:
        row1 = pid // n_parts
        part = pid % n_parts
    else:
        row1 = pid
        part = 0
    rows = block_indices(row1, BLOCK_ROWS, n_rows)
    row_ok = rows < n_rows
    base = src_ptr + rows.to(tl.int64) * stride_row
    cols = tl.arange(0, BLOCK_N)
    if ONE_TILE and PIECES > 1:
        WIDTH: tl.constexpr = BLOCK_N // PIECES
        offsets = (tl.arange(0, PIECES) * WIDTH)[None, :, None] + tl.arange(0, WIDTH)[None, None, :]
        ptrs = base[:, None, None] + offsets
        if FULL_TILES:
            x = tl.load(ptrs)
        else:
            x = tl.load(ptrs, mask=row_ok[:, None, None] & (offsets < red_len), other=float("-inf"))
        big = tl.max(tl.max(x, 2), 1)
        ref, lower, upper = _reference(big, 1.0)
        terms = _terms(x, ref[:, None, None], lower[:, None, None], upper[:, None, None]).to(tl.float64)
        total = tl.sum(tl.sum(terms, 2), 1)
        kept = _finish(dst_ptr, flags_ptr, rows, row_ok, big, total, total, exp_error, fp64_slack, False)
        if FINISH_LANES > 0:
            _finish_in_fp64(src_ptr, stride_row, n_rows, rows, row_ok & ~kept, red_len, dst_ptr, flags_ptr,
                            BLOCK_N, FINISH_LANES)
    elif ONE_TILE:
        if FULL_TILES:   # no mask, nor its select of -inf an element
            x = tl.load(base[:, None] + cols[None, :])
        else:
            mask = row_ok[:, None] & (cols < red_len)[None, :]
            x = tl.load(base[:, None] + cols[None, :], mask=mask, other=float("-inf"))
        big = tl.max(x, 1)
        ref, lower, upper = _reference(big, 1.0)
        terms = _terms(x, ref[:, None], lower[:, None], upper[:, None]).to(tl.float64)
        total = tree_sum_blocked_rows(terms, BLOCK_ROWS, BLOCK_N, TREE_VEC, TREE_THREADS)
        kept = _finish(dst_ptr, flags_ptr, rows, row_ok, big, total, total, exp_error, fp64_slack, False)
        if FINISH_LANES > 0:
            _finish_in_fp64(src_ptr, stride_row, n_rows, rows, row_ok & ~kept, red_len, dst_ptr, flags_ptr,
                            BLOCK_N, FINISH_LANES)
    else:
        REPEATS: tl.constexpr = BLOCK_N // (TREE_THREADS * TREE_VEC)
        s = tl.zeros([TREE_THREADS], tl.float64)
        r = tl.zeros([TREE_THREADS], tl.float32)
        m = tl.full([TREE_THREADS], float("-inf"), tl.float32)
        first = part.to(tl.int64) * chunk_len
        end = tl.minimum(first + chunk_len, red_len)
        ptrs = base + first + cols   # one row: BLOCK_ROWS == 1
        for start in tl.range(first, end, BLOCK_N, num_stages=LOOP_STAGES):
            x = tl.load(ptrs, mask=(start + cols) < end, other=float("-inf"), eviction_policy="evict_first")
            # element j = (repeat * THREADS + thread) * VEC + e: the blocked layout's registers
            v = tl.reshape(x, (REPEATS, TREE_THREADS, TREE_VEC))
            moved = tl.maximum(m, tl.max(tl.max(v, 2), 0))
            ref, lower, upper = _reference(moved, 1.0)
            f = tl.where(m == moved, 1.0, _terms(m, ref, lower, upper))
            new = tl.sum(tl.sum(_terms(v, ref[None, :, None], lower[None, :, None], upper[None, :, None]).to(
                tl.float64), 2), 0)
            scaled = s * f.to(tl.float64)
            r = r * f + tl.where(f != 1.0, scaled.to(tl.float32), 0.0)
            s = scaled + new
            m = moved
            ptrs += BLOCK_N
        big1, total1, rescaled1 = _merged(m, s, r)
        zero = tl.zeros([BLOCK_ROWS], tl.float64)   # the row's scalars as [1]
        if BLOCK_PARTS > 0:
            slot = row1.to(tl.int64) * n_parts + part
            tl.store(part_m_ptr + slot, big1.to(tl.float64))
            tl.store(part_s_ptr + slot, total1)
            tl.store(part_r_ptr + slot, rescaled1)
            tl.debug_barrier()   # every thread's stores made before the arrival is published
            counter = arrivals_ptr + row1
            if tl.atomic_add(counter, 1, sem="acq_rel", scope="gpu") == n_parts - 1:
                tl.atomic_xchg(counter, 0)
                parts = tl.arange(0, BLOCK_PARTS)
                slots = row1.to(tl.int64) * n_parts + parts
                here = parts < n_parts
                pm = tl.load(part_m_ptr + slots, mask=here, other=float("-inf")).to(tl.float32)
                ps = tl.load(part_s_ptr + slots, mask=here, other=0.0)
                pr = tl.load(part_r_ptr + slots, mask=here, other=0.0).to(tl.float32)
                big2, total2, rescaled2 = _merged(pm, ps, pr)
                _finish(dst_ptr, flags_ptr, rows, row_ok, zero.to(tl.float32) + big2, zero + total2,
                        zero + rescaled2, exp_error, fp64_slack)
        else:
            _finish(dst_ptr, flags_ptr, rows, row_ok, zero.to(tl.float32) + big1, zero + total1, zero + rescaled1,
                    exp_error, fp64_slack)
