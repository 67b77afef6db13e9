"""The planner: a pure function from the shape of a reduction to its launch plan.

`plan_reduction` sees only sizes, which strides are unit, the element size, the mode and the device's
SM count, so it is unit-tested on the CPU and cached. A plan is a chain of passes: the first reads the
input, each later one merges the partial states the previous one wrote (the `split` schedule), and
the last writes the output. The plan also states the depth of the evaluation tree it builds -- the
largest number of roundings any element can go through -- which is what precred.bounds needs.

Numerics never depend on anything but the plan, and the plan depends only on the arguments below:
the same input on the same device always takes the same path.
"""
from dataclasses import dataclass, replace
from functools import lru_cache

import torch

from .modes import norm_affine_dtype


@dataclass(frozen=True)
class Pass:
    schedule: str      # "inner" (reduced axis is the fast one) or "outer" (kept inner axis is)
    outer: int         # outer extent of this pass's (outer, reduce, inner) view
    red: int           # reduced extent
    inner: int         # inner extent
    lanes: int         # accumulators per output: BLOCK_N (inner) or BLOCK_R (outer), a power of two
    block_kept: int    # outputs per program: BLOCK_M (inner) or BLOCK_I (outer)
    chunk: int         # reduced elements per part, a multiple of `lanes`
    parts: int         # parts per output; > 1 means this pass writes partial states
    num_warps: int
    tile_counter: bool = False   # pairwise: tiles merged by a binary counter, not chained per lane
    loop_stages: int = 1         # num_stages of the software-pipelined loop (1: a plain loop)
    interleaved: bool = False    # split inner pass: part p takes the tiles p, p + parts, p + 2 parts, ... of
                                 # the row instead of `chunk` consecutive elements (LONG_SPLIT_WARPS' note)

    @property
    def part_tail(self) -> bool:
        """Whether a part can end in a partial tile: only the row's last, where `red` is not a multiple of
        `lanes` (every chunk is one)."""
        return self.red % self.lanes != 0

    @property
    def tiles_per_lane(self) -> int:
        """Tiles a program streams per part: the longest chain of sequential updates of a lane, or the
        leaves of the binary counter (tile_counter)."""
        return -(-min(self.chunk, self.red) // self.lanes)

    @property
    def depth(self) -> int:
        """Roundings an element can go through in this pass. Chained lanes: the lane's chain (the first
        update adds to the exact identity 0), then log2(lanes) levels of the fixed tree. Binary counter:
        log2(lanes) levels of the tile's tree, then at most ceil(log2(tiles)) counter merges."""
        tree = self.lanes.bit_length() - 1
        if self.tile_counter:
            return tree + (self.tiles_per_lane - 1).bit_length()
        return (self.tiles_per_lane - 1) + tree


@dataclass(frozen=True)
class Plan:
    passes: tuple
    # The split's merge runs inside the first pass's launch (schedules/inner.py): every program writes
    # its partial state, and the last of a row's parts to arrive merges them exactly as passes[1]
    # would (same lanes, same order, so the same bits). Only for two inner passes.
    fused_merge: bool = False
    # Instead, passes[1] launches as a programmatic dependent of passes[0] (on a GPU that has them):
    # its programs are resident while the first pass runs and wait for its writes. Only for two inner
    # passes (PROGRAMMATIC_MERGE_STRATEGIES).
    dependent_merge: bool = False

    @property
    def depth(self) -> int:
        return sum(p.depth for p in self.passes)

    @property
    def schedule(self) -> str:
        """The first pass's schedule, with `+split` when partial states are merged by later passes."""
        first = self.passes[0]
        return first.schedule + ("+split" if len(self.passes) > 1 else "")


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _pow2_at_most(n: int) -> int:
    return 1 << max(0, n.bit_length() - 1)


# Bytes of one loaded tile: 16 KiB per iteration keeps enough loads in flight per program.
TILE_BYTES = 16384
# ...and at most this many bytes of accumulators per tile (16 registers per thread at 8 warps; the
# registers layout of the outer schedule holds tile/256 elements per thread whatever its warps).
# 32768 -> 16384 (bench/sweep_outer.py, H100, 2026-11-25, GB/s): over dim 0, first passes whose
# registers left a second, short wave of programs gained -- sum 262144x256 bf16 fast 1379 -> 1657, fp64
# 1084 -> 1613 (now within 10% of fast), fp32 fp64 1872 -> 2239; logsumexp bf16 1024x65536 fast 1345 ->
# 1838, fp64 1081 -> 1319, 262144x256 fast 1012 -> 1286, fp64 920 -> 1159, fp32 fp64 1068 -> 1370 --
# while logsumexp bf16 lost where the larger tiles fitted one wave: 8192^2 fast 1988 -> 1849, fp64
# 1326 -> 1267, 65536x1024 fast 1846 -> 1706, fp64 1545 -> 1263. Every other dim-0 sum and every
# dim=-1 sum and logsumexp moved within 3%. Doubling PROGRAMS_PER_SM with it lost on most dim-0 cases.
ACC_TILE_BYTES = 16384
# The pairwise mode keeps 32768: its lanes are the tile (one balanced tree per tile), and the halved
# tile cost bf16 up to 27% (gpu_suite, H100: 8192^2 dim=-1 2354 -> 1730 GB/s, 16x262144 dim 0 831 -> 616).
PAIRWISE_ACC_TILE_BYTES = 32768
# Welford over rows holds WELFORD_ROWS_ACC_TILE_BYTES[accumulator bytes] of accumulators per tile instead
# (precred.launch.plan_for) on fp32 rows and on 16-bit rows of at least WELFORD_ROWS_SMALL_TILE_MIN_RED
# elements (by the accumulator's bytes; no entry: never). Its state is three arrays (mean, m2 and the
# shift): the 16 KiB tile held 128-177 registers per thread. bench/sweep_outer.py --op var --dim -1, H100, GB/s, two runs each. 16 -> 8 KiB: fp32 fast 1024x65536
# 2291/2306 -> 2400/2415, 65536x1024 2300 -> 2462/2455, 4096^2 1483/1487 -> 1591/1571, 8192^2 2229/2238 ->
# 2308/2307, 262144x256 2373 -> 2429; bf16 fast 1024x65536 1458/1464 -> 1763/1762 -- but bf16 fast 8192^2 1556
# -> 1354, hence the row length. fp64, 16 -> 8 -> 4 KiB: fp32 1024x65536 2133/2149 -> 2156/2151 -> 2461/2461,
# 8192^2 1892 -> 1907/1894 -> 2312/2300, 65536x1024 2030/2050 -> 2154/2149 -> 2183/2163, 262144x256 2178 -> 2226
# -> 2296; bf16 1024x65536 1299/1301 -> 1558/1556 -> 1597/1577; shorter bf16 rows, 16 -> 4 KiB
# (bench/var_suite.py at 3362820 against 8251617): 65536x1024 1332 -> 1185, 262144x256 1426 -> 1243, 8192^2 1227
# -> 1364, 4096^2 939 -> 937: rows shorter than 8192 keep 16 KiB (bench/sweep_outer.py --op var --dim -1, H100,
# two runs, minimum row length 32768 -> 8192: bf16 fp64 8192^2 1225/1227 -> 1361/1357, 65536x1024 and 4096^2
# unchanged; bf16 fast 8192^2 1569/1567 -> 1365/1363, hence 32768 for the fp32 accumulator). (4 KiB cost fp32
# fast 1024x65536 10%.) Few long rows (16x262144) keep their plan: the short parts narrow the lanes below any
# of these tiles. With the vector moments (WELFORD_VECTOR_MOMENTS; a TREE_VEC-th of the state) fp64 went
# 4 -> 8 KiB, 16-bit rows from 32768 elements (sweep_outer --op var --dim -1, H100, GB/s): fp32 262144x256 2473 -> 2561,
# 8192^2 2616 -> 2641, bf16 1024x65536 1906 -> 2002 -- but bf16 8192^2 2068 -> 1889 (16 KiB: 2093);
# 16 and 32 KiB lost up to 17% elsewhere. With the plain loop loading a tile ahead (WELFORD_PREFETCH) the
# fp32 accumulator's small tile starts at rows of 8192 (2026-11-27, sweep_outer --op var --dim -1, H100,
# two runs, GB/s: bf16 fast 8192^2 2182/2182 -> 2227/2248 with the prefetch -> 2305/2305 with 8 KiB too;
# the other rows and fp64 within 1%).
# With each vector's moments by two passes and the cheaper tile weights (WELFORD_TWO_PASS_VECTORS), 16-bit
# rows with the fp64 accumulator keep ACC_TILE_BYTES at every length (no entry below: never the small
# tile). H200, 2026-12-04, bench/sweep_outer.py --op var --dim -1 --modes fp64, two rounds, GB/s, small
# tile from 32768 -> never: bf16 2048x32768 2408/2413 -> 2512/2551, 1024x65536 2592/2581 -> 2781/2749,
# 256x262144 2145/2130 -> 2607/2598, 64x1048576 2138/2140 -> 2635/2623; fp16 2427/2406 -> 2542/2575,
# 2694/2653 -> 2844/2844, 2230/2239 -> 2690/2690, 2181/2178 -> 2685/2683. (The 16 KiB tile for fp32 rows,
# measured in the same session: fp64 8192^2 3654/3631 -> 3538/3537, fast 1024x65536 3488 -> 3565.)
WELFORD_ROWS_ACC_TILE_BYTES = {4: 8192, 8: 8192}
WELFORD_ROWS_SMALL_TILE_MIN_RED = {4: 8192}
# Lanes are narrowed until each runs a chain of at least this many tiles (when the row allows): the
# final lane tree then costs little next to the streaming, while rows still load in 128-byte runs.
MIN_TILES_PER_LANE = 8
MIN_LANES = 32
# ...except the plain sums in fp32 (fast on fp32, bf16 and fp16 inputs; precred.launch.plan_for), whose
# chains cost least per element: 2 tiles per lane, so short rows load in longer runs (262144 x 256 bf16:
# 128 lanes of 256 bytes instead of 32 lanes of 64 bytes) and need no pipelined loop.
# bench/sweep_outer.py --dim -1, H200, GB/s 8 -> 2, two runs: bf16 262144x256 2599/2620 -> 3220/3163,
# fp32 3600/3624 -> 3687/3687; 65536x1024, 8192^2, 1024x65536 within 2% (H100, gpu_suite: bf16
# 262144x256 1917 -> 2564, fp32 2557 -> 2686). kahan and fp64 lost up to 30% that way on the H200 (their
# chains want the pipelined loop), Welford up to 5x: they keep 8 -- except fp64 over 16-bit rows and over
# rows shorter than PLAIN_16BIT_ROWS_MIN_RED, which take 2 too: H100, bench/sweep_outer.py --dim -1, two runs,
# 8 -> 2: bf16 262144x256 2044/2059 -> 2522/2522, 65536x1024 2479/2504 -> 2709/2708, 8192^2 2450/2448 ->
# 2589/2592 (fast 2540-2699 there); fp32 262144x256 2568 -> 2740, but 65536x1024 2641 -> 2566, 8192^2 2643
# -> 2589. Over dim 0 (the outer schedule) 2 lost up to 4x (16x262144 bf16 895 -> 230).
PLAIN_MIN_TILES_PER_LANE = 2
# (MIN_TILES_PER_LANE holds for inner passes over partial states -- a split's merge -- too. One tile,
# 1024 lanes on 525 parts, measured no faster: bench/sweep_outer.py --dim -1 --shapes 1x268435456, H100,
# amax fp32 2945/2940/2946 -> 2935/2936/2936 GB/s, sum kahan fp32 2942/2943 -> 2869/2875, the rest
# within 0.5%.)
# Measured and not kept (H200, 2026-12-01, bench/sweep_outer.py --op sum --dim -1 --modes fast,fp64, two
# runs): the plain sums' lanes merged by tree.tree_sum_blocked_rows instead of the generic lane tree --
# fast fp32 1024x65536 3634/3642 -> 3715/3697, bf16 8192^2 3337/3342 -> 3525/3464, the rest within 1-2% --
# but its order follows the program's threads, so a pass's warps would change its bits
# (tests/test_gpu_only.py test_warps_of_a_pass_do_not_change_its_bits failed with it). Its successor, the
# halves tree whose order the threads do not change, is PLAIN_HALVES_MIN_LANES (measured in its note).
# kahan over 16-bit input had its own first passes until 2026-12-01 (lanes of 8-element vector sums by
# TwoSum trees, or in fp64 split into pairs on short rows; 1.06-1.15x fast's time at best): the public
# functions now sum such input in fp64 (precred.modes.sum_mode, measured in its note).
# Welford's first inner passes over the input keep lanes of 16-byte vectors' (mean, m2) (schedules/inner.py
# welford_vector_part): equal-count merges inside the vector, one Chan merge per lane and tile, and the
# full tiles' lane tree without divisions. bench/sweep_outer.py --op var --dim -1, H100, GB/s fast / fp64,
# per-element updates -> vector moments (with the division-free lane tree): fp32 8192^2 2305/2313 ->
# 2626/2611, 65536x1024 2464/2182 -> 2630/2572, 262144x256 2429/2296 -> 2557/2469, 1024x65536 2401/2475
# -> 2635/2587; bf16 8192^2 1573/1370 -> 2189/2045, 65536x1024 1666/1330 -> 2223/2161, 262144x256
# 1737/1402 -> 1975/1992, 1024x65536 1734/1575 -> 2227/1896. With them, chains of 16 or 32 tiles and the
# full warps moved within noise or lost (65536x1024 bf16 32 tiles: 1746), 2 or 3 pipeline stages lost,
# and plain loops (with evict_first) gained only for the fp32 accumulator over 16-bit rows of at least
# PLAIN_16BIT_ROWS_MIN_RED (bf16 fast 1024x65536 2216 -> 2324, 65536x1024 2218 -> 2311, 4096^2 1507 ->
# 1670, 8192^2 even; fp64 1024x65536 1876 -> 1416, fp32 rows lost up to 6%): precred.launch.plan_for.
WELFORD_VECTOR_MOMENTS = True
# Welford's plain loops over the input (the fp32 accumulator over 16-bit rows, above) load the next tile
# into registers while this one is folded (schedules/inner.py welford_vector_part; the exact filter's
# loads). bench/sweep_outer.py --op var --dim -1 --modes fast, H100, 2026-11-27, two runs each, GB/s:
# bf16 8192^2 2189/2191 -> 2255/2256, 65536x1024 2337/2335 -> 2366/2388, 1024x65536 2344/2348 -> 2368/2368
# (pipelined plans -- fp32 rows, fp64, 262144x256 -- unchanged). ncu before it (bf16 8192^2): DRAM 74% of
# peak, issue slots 52% busy, 86 registers: 5 programs (20 warps) per SM. Measured and not taken in the
# same sweeps: ptxas register caps of 64 / 72 for these passes (spills; bf16 fast 65536x1024 2382 ->
# 1612 / 1931, fp32 fast 4-9% slower); the same tile-ahead loop for kahan's vector sums over bf16 rows
# (262144x256 2367/2422 -> 2480/2483, 8192^2 2378/2382 -> 2415/2368, 1024x65536 2360/2395 -> 2339/2386)
# and for logsumexp's vector states (bf16 fast 8192^2 2365/2339 -> 2313/1304, 65536x1024 2441/2439 ->
# 2375/2372, 1024x65536 2264/2259 -> 2307/2306; fp64 within 2%). That loop is near the fp64 pipe's rate
# (~7 fp64 operations and one fp32 -> fp64 conversion an element, ncu issue slots 64% busy, DRAM 71%):
# 85% of the copy bandwidth over bf16 needs fewer of them.
WELFORD_PREFETCH = True
# Each 16-byte vector's (mean, m2) by two passes over its registers (strategies/welford.py
# welford_vector_moments: the pairwise sum, then the squared deviations from its mean, the leaf pairs as
# fma(a, a, b * b)) instead of the merges of equal counts: sm_90 loop of var fp64 over bf16 rows, fp64
# operations per 8 elements 65 -> 59, and 48 with steps.tile_weights' weights (17 -> 6 fp64 operations a
# tile). (An earlier two-pass form, without the fma leaves, counted 116 against 112 and was not measured.)
# H200, 2026-12-04, bench/sweep_outer.py --op var --dim -1, GB/s, two rounds, fp64 mode, equal-count
# merges and two divisions -> two passes -> two passes and the cheap weights: bf16 4096^2 1686/1686 ->
# 1736/1742 -> 1792/1792, 8192^2 2344/2341 -> 2495/2472 -> 2697/2660, 65536x1024 2415/2456 -> 2575/2586
# -> 2785/2776, 262144x256 2188/2170 -> 2216/2241 -> 2386/2389, 1024x65536 2142/2148 -> 2237/2271 ->
# 2583/2571; fp32 8192^2 3508/3526 -> 3562/3571 -> 3649/3650, 65536x1024 3544/3564 -> 3567/3564 ->
# 3599/3596, 262144x256 3396/3400 -> 3407/3416 -> 3498/3481, 1024x65536 3500/3523 -> 3544/3547 ->
# 3589/3589 (4096^2 fp32 2315-2436 in every variant). `fast` (the fp32 accumulator) within 1-3% either
# way. Measured after it (same sweep, two rounds): WELFORD_ROWS_ACC_TILE_BYTES of 16 KiB for every
# accumulator (bf16 fp64 1024x65536 2580/2587 -> 2761/2796 but fp32 fp64 3-4% and bf16 fast 1024x65536
# 3112 -> 2830 slower: taken for 16-bit rows with the fp64 accumulator alone,
# WELFORD_ROWS_SMALL_TILE_MIN_RED's note) or 4 KiB (bf16 fp64 1024x65536 -> 2326/2330).
WELFORD_TWO_PASS_VECTORS = True
# A Welford pass whose parts are whole tiles (Pass.part_tail false) is compiled without the partial-tile
# code of its vector part (schedules/inner.py PART_TAIL) on rows of at least
# WELFORD_TAIL_FREE_MIN_RED[accumulator bytes] elements (no entry: never).
# The tail's counted tree held most of the kernel's registers (sm_90, bench/kernel_resources.py: var fast
# fp32 8192^2 80 -> 37, fp64 fp32 8192^2 -> 52, fp64 bf16 82 -> 68). bench/sweep_outer.py --op var --dim -1,
# H100, 2026-11-27, two runs, GB/s with the tail code -> without: fp64 mode bf16 8192^2 2082/2066 ->
# 2137/2159, 65536x1024 2176/2178 -> 2203/2204, 1024x65536 1994/2015 -> 2055/2034, 4096^2 1380/1378 ->
# 1445/1442; fp32 65536x1024 2553/2565 -> 2610/2626, 1024x65536 2565/2554 -> 2583/2565; but rows of 256
# lost 2% (fp32 262144x256 2572/2573 -> 2514/2522, bf16 2000/1982 -> 1954/1952; var_suite: fp32 2591 ->
# 2528, below 85% of the copy), hence the row length. The fp32 accumulator lost without it (more
# programs per SM): fast bf16 262144x256 1955/1971 -> 1657/1668, 8192^2 2307/2338 -> 2243/2261, fp32
# 262144x256 2561/2568 -> 2451/2464, 1024x65536 2635/2636 -> 2565/2565. So the fp64 accumulator only
# (no entry for 4 bytes). amax / amin's value_tail left out the same way (sm_90: fp32 16x262144 47 -> 36
# registers) lost too (same sweep --op amax, three runs): fp32 16x262144 1147 -> 1112/1113, 1024x65536
# 2630 -> 2534/2538, bf16 262144x256 1920/1938 -> 1853/1854 (65536x1024, bf16 1024x65536 +1%): not taken.
# Nor Welford's tile part over a strided axis (schedules/outer.py welford_tile_part; sm_90 fp64 bf16
# 8192^2 dim 0 128 -> 95 registers, fp32 92 -> 56): sweep_outer --op var --dim 0 --modes fp64, H100, the
# same within 0.5% on the five dim-0 shapes but one (bf16 1024x65536 1834 -> 1911 in the one run read).
WELFORD_TAIL_FREE_MIN_RED = {8: 1024}
# logsumexp's first inner passes over the input (the fp32 filter of its fp64 mode included) keep lanes of
# 16-byte vectors' (s, m) (schedules/inner.py stable_exp_vector_part): each vector's maximum, then one
# exponential and two additions an element, and one merge per lane and tile; over a strided axis with the
# lanes in registers, each tile's (s, m) per column the same way (schedules/outer.py stable_exp_tile_part).
# By accumulator size. bench/sweep_outer.py --op logsumexp --dim -1, H100, GB/s per-element updates ->
# vector states (both with exp_flushed): bf16 fast 1024x65536 2115 -> 2260, 8192^2 2213 -> 2368,
# 65536x1024 2266 -> 2422, 262144x256 2009 -> 2043, 16x262144 639 -> 694 (fp64: 1604 -> 1680, 1813 ->
# 1916, 1913 -> 2043, 1791 -> 1838, 518 -> 532: its fp32 filter); fp32 fast within 1% but 16x262144
# 1044 -> 1095. The fp64 accumulator lost on long rows (16x262144 791 -> 671, 1024x65536 1719 -> 1562;
# 8192^2 1386 -> 1492): one fp64 exponential per tile on each lane's chain, fewer chains per thread.
# Over dim 0 (tiles of 2 or 4 lanes on these shapes) fp32 accumulator: within 2% (bf16 1024x65536 2015
# -> 2051); fp64: 8192^2 fp32 1685 -> 1307. With the vector states, measured and dropped (bf16 fast,
# H100): 2048 / 4096-element row tiles (1024x65536 2248 -> 2355 / 2319 but 262144x256 2064 -> 1787 /
# 1747), pipelined 16-bit rows (65536x1024 2416 -> 2241), outer tiles of 4096 / 8192 / 16384 elements for
# the fp32 accumulator (within 2%, then 262144x256 2205 -> 1374 / 248), 8 or 32 tiles per short part
# (16x262144 within noise or lost). A cheaper fp64 exp (a timing stand-in, 2026-11-26: 2^(k/64) by fp32
# exp2, degree-5 polynomial, ~14 instructions against libdevice's ~40) took fp32 rows fp64 8192^2 1390 ->
# 1545 per element, 1669 with vector states (3.85x torch; 1024x65536 1804, 4.13x), dim 0 1676 -> 1751:
# the per-element update's selects and compares weigh as much as the exp -- 5x needs more than the exp.
# The fold against the new maximum (schedules/inner.py stable_exp_fold_vectors: no merge direction to
# select, the maximum compared in fp32; was: each vector's own state merged into the lane's), H100,
# sweep_outer --op logsumexp --dim -1, two runs each, old / new tree, fp64 accumulator with vector states:
# fp32 8192^2 1481 -> 1519, 65536x1024 1517 -> 1556, 262144x256 1560 -> 1640, 1024x65536 1561 -> 1578,
# 16x262144 657 -> 645 (per-element updates: 1395, 1476, 1522, 1715, 779). The fp32 accumulator moved
# within 1% on logsumexp but softmax / log_softmax bf16 16x262144 varied 247-312 GB/s against the old
# code's steady 303-311 (three runs): it keeps the merge of each vector's own state.
# Hence, for the fp64 accumulator over fp32 and 16-bit input, vector states on rows of at most
# STABLE_EXP_FP64_VECTOR_ROWS_MAX_RED elements (+5-9% on those three) and in softmax's row loop
# (STABLE_EXP_FP64_VECTOR_ROW_LOOP; sweep_outer --op softmax, fp64, 1024x65536 fp32 778 -> 876/881, bf16
# 419 -> 549/554); longer rows, fp64 input and the strided axis keep the per-element updates.
STABLE_EXP_VECTORS = {4: True, 8: False}
STABLE_EXP_FP64_VECTOR_ROWS_MAX_RED = 8192
STABLE_EXP_FP64_VECTOR_ROW_LOOP = True


def stable_exp_vectors(accumulator_size: int, element_size: int, red: int | None) -> bool:
    """Whether a first pass of the stable exponential sum over contiguous rows of `red` elements (None:
    softmax's row loop) keeps vector states (schedules/inner.py stable_exp_vector_part): STABLE_EXP_VECTORS
    by accumulator, and the fp64 accumulator over fp32 or 16-bit input where measured faster (its note)."""
    if STABLE_EXP_VECTORS[accumulator_size]:
        return True
    if accumulator_size != 8 or element_size > 4:
        return False
    return STABLE_EXP_FP64_VECTOR_ROW_LOOP if red is None else red <= STABLE_EXP_FP64_VECTOR_ROWS_MAX_RED
# First-pass tile (elements) of the stable-exp passes over many outputs (bench/sweep_state.py logsumexp;
# precred.launch.plan_for): rows, and the fp64 accumulator over a strided axis (the fp32 accumulator
# over a strided axis keeps the planner's default).
STABLE_EXP_TILE = 1024
# 16-bit rows of at least STABLE_EXP_16BIT_LONG_ROW[0] elements take tiles of [1] instead (a tile of 1024
# bf16 is 2 KiB). H200, 2026-11-29, sweep_outer --op logsumexp --dim -1, bf16, GB/s two runs, tiles of
# 1024 -> 2048 -> 4096: fast 1024x65536 2680/2713 -> 3048/3093 -> 2975/3013, 8192^2 3002/3055 ->
# 3037/3039 -> 2996/3002, 65536x1024 3106/3109 -> 3132/3141, 262144x256 2625/2656 -> 2319/2347 (hence
# long rows only); 16x262144 707/736 -> 736/736; the fp64 mode (the certified fp32 pass) within 1%
# on the long rows, 262144x256 -9%. softmax / log_softmax do not take these passes (no change).
STABLE_EXP_16BIT_LONG_ROW = (16384, 2048)
STABLE_EXP_TILE_MIN_OUTPUTS = 1024
# The same over a strided axis (schedules/outer.py welford_tile_part): each tile's lanes merged first, in
# registers, then one Chan merge per column and tile. bench/sweep_outer.py --op var --dim 0, H100, GB/s
# fast / fp64, per-lane updates -> tile moments (both with the fp32 tile weights): bf16 8192^2 1758/1534 ->
# 1796/1583, 65536x1024 1541/1361 -> 1572/1396, 1024x65536 1879/1462 -> 1930/1582, 16x262144 762/751 ->
# 827/771; fp32 within 1% (the 1024-element tiles hold 2 lanes: one level of merges).
WELFORD_OUTER_TILE_MOMENTS = True
# Measured and dropped (H200, 2026-12-04, bench/sweep_outer.py --op var --dim 0, two rounds, GB/s): each
# tile's column moments by two passes down the column (welford_vector_moments' algorithm on axis 0)
# instead of the equal-count tree. Over the wide axes' tiles of 2 rows it is no fewer operations: bf16
# fp64 8192^2 2050/2057 -> 1931/1941, 65536x1024 1940/1945 -> 1840/1842, 1024x65536 2005/2011 ->
# 1895/1896 (fast within 1%), with WELFORD_OUTER_TILE 2048 / 4096 (4 / 8 rows) 1980-2024, 1820-1855;
# equal counts on 4096: 2079-2086, 1941-1945, 2060-2065 (fast -3 to -8%). Only the narrow 262144x256
# gained (fp64 bf16 2082/2087 -> 2130, its 48 bytes of spills gone); fp32 within 1%.
# First-pass tile (elements) of Welford's outer passes (bench/sweep_state.py var; precred.launch.plan_for).
# With the tile moments, 2048 / 4096 / 8192 gained on bf16 8192^2 and 1024x65536 (1796 -> 1952-1978,
# 1930 -> 2027) but lost elsewhere: 262144x256 bf16 1378 -> 1318 / 783 / 81 (fp64 31 at 4096), 65536x1024
# bf16 1572 -> 1437-1651, fp32 65536x1024 2206 -> 2179-2309 (sweep_outer, H100). The collapse: 262144x256
# takes the wide layout there (lanes across warps: no tile moments), whose 32 x 128 fp64 states spilled
# 27 KB per thread (bench/kernel_resources.py plan.WELFORD_OUTER_TILE=4096 var/fp64:bfloat16:262144x256:0).
WELFORD_OUTER_TILE = 1024
# Pipeline stages of those passes (first outer passes in the registers layout; the wide layout keeps
# LOOP_STAGES["outer"]), by input element size: their 1024-element tiles are 2 KiB of bf16, which want
# more of them in flight. bench/sweep_outer.py --op var --dim 0, H100, GB/s fast / fp64 at 3 -> 4 -> 6 -> 8
# stages: bf16 1024x65536 1894/1600 -> 2075/1784 -> 2131/1820 -> 2103/1835, 8192^2 1832/1578 ->
# 1980/1747 -> 2034/1848 -> 2022/1846, 65536x1024 1597/1393 -> 1715/1529 -> 1753/1604 -> 1748/1609;
# fp32 1024x65536 2510/2427 -> 2556/2500 -> 2513/2449 -> 2493/2413, 8192^2 2467/2371 -> 2498/2437 ->
# 2451/2384, 65536x1024 2231/2151 -> 2260/2206 -> 2218/2154. (LOOP_STAGES["outer"] = 4 for every
# outer pass lost on the wide layout, var bf16 262144x256 1399 -> 1309, and moved logsumexp over
# dim 0 -6% to +5%, the sums -12% to +10%; 4, 6 or 8 stages in these passes alone moved sum fast /
# exact, logsumexp fast and amax over dim 0 within +-2%, bf16 and fp32: they keep 3.) 8-byte inputs
# were not measured: the default.
WELFORD_OUTER_STAGES = {2: 6, 4: 4}
# Welford's first tile (elements) over a narrow strided axis (NARROW_OUTER_MIN_INNER's note).
WELFORD_NARROW_OUTER_TILE = 8192
# Split a long reduction when fewer than two programs per SM would otherwise run, into enough parts
# for this many per SM...
PROGRAMS_PER_SM = 4
# ...and the input is at least this large: below it a second launch costs more than it saves.
SPLIT_MIN_BYTES = 4 << 20
# The parts: at most PROGRAMS_PER_SM per SM in all (rounded down), not at least (rounded up, as before:
# a partial second round of programs where their registers fit only PROGRAMS_PER_SM per SM -- the exact
# filter over dim 0 of 1024 x 65536 ran 640 (fp32) and 576 (bf16) programs of 4 per SM on 132 SMs).
# bench/sweep_outer.py --dim 0, H100, GB/s up -> down, two runs: exact 1024x65536 fp32 2251/2249 ->
# 2449/2447, bf16 1641/1609 -> 1986/1981; kahan / fp64 bf16 there +1-2%, fast and every other shape of
# sum within 1% (8192^2 64 parts instead of 66); logsumexp fp64 1024x65536 fp32 1567 -> 1680; amax
# +0-2%; var fast bf16 1024x65536 1964 -> 1889 (one run), the rest of var within 1%.
SPLIT_PARTS_WITHIN_TARGET = True
# In place of PROGRAMS_PER_SM, for the strategies named here (precred.strategies ids: kahan, logsumexp's
# certified fp32 pass on 16-bit input), this many per SM where the split runs over a strided axis (the outer
# schedule; narrow axes take NARROW_OUTER_PROGRAMS_PER_SM). H200, 2026-11-29, bench/sweep_outer.py --dim 0,
# GB/s at 4 -> 8 (a second run at 4 within 1%, 4096^2 within 4%): kahan bf16 8192^2 2580 -> 2711, 65536x1024
# 2461 -> 2464, 1024x65536 2650 -> 2696, 4096^2 1456 -> 1487; fp32 3318 -> 3418, 3250 -> 3347, 3351 -> 3485,
# 2066 -> 2181; logsumexp fp64 (certified pass) bf16 8192^2 1175 -> 1197, 65536x1024 1051 -> 1350,
# 1024x65536 1476 -> 1665, 4096^2 1370 -> 1321 (6: 1174 / 1351 / 1659 / 1280). Not taken at 8 (same sweep):
# sum fast (fp32 -2 to -4%), fp64 sums (bf16 -2 to +1%), logsumexp fast (fp32 -2 to -5%; bf16 -1 to +5%),
# var (fast -2 to -19%; 6 and Welford tiles of 4096 lost too).
OUTER_SPLIT_PROGRAMS_PER_SM = {1: 8, 10: 8}
# A split inner pass whose parts would hold fewer than SHORT_PART_TILES tiles per lane (few rows of a
# few MB: 16 x 262144) is planned for fewer, longer parts instead: SHORT_SPLIT_PROGRAMS_PER_SM programs
# per SM, lanes narrowed to SHORT_PART_TILES tiles per part, and the full warps of the heavy states.
# H100, kernel time of 16 x 262144 dim=-1 (.probe sweep, figures in the stop note of the third session
# of 2026-11-23), 32 parts of 4096 lanes -> 16 parts of 1024 lanes, 4 warps: fp32 var fp64 20.2 -> 12.7 us,
# logsumexp fp64 35.2 -> 16.7, amax 10.5 -> 7.2, kahan sum 6.8 -> 5.8, fast sum 6.0 -> 5.4; bf16 alike.
SHORT_PART_TILES = 16
SHORT_SPLIT_PROGRAMS_PER_SM = 2
# (Their warps, 4 by the tile, measured against 8 and 16, with 2 or 1 programs per SM: bench/sweep_outer.py
# --dim -1 --shapes 16x262144, H100, three runs, amax fp32 1165/1114/1111 against 1072-1168, bf16 736/697/736
# against 660-743; sum fast / fp64 alike: within the noise, or lost.)
# The sums (fast, pairwise, kahan, fp64) and the extrema narrow their lanes to 8 tiles per short part instead
# (twice the lanes: 8 KiB tiles of fp32). bench/sweep_outer.py --dim -1 --shapes 16x262144 --repeat 3, H100,
# GB/s 16 -> 8, three runs each: fp32 pairwise 1034/1074/1074 -> 1108/1108/1168, fp64 1072/1074/1120 ->
# 1170/1173/1173, fast 1152/1104/1151 -> 1130/1192/1192, kahan 1118/1120/1116 -> 1106/1155/1159; bf16 fast
# 703/736/699 -> 776/773/734, pairwise 657/655/629 -> 720/683/688 (torch 963, 599). var and logsumexp fp64
# measured slower that way (fp32 var fast 893/933 -> 823/858, logsumexp fp64 763 -> 650): they keep 16. The
# extrema take 8 too (sweep_outer --op amax|argmax, H200, 16 -> 8, GB/s: amax fp32 1288 -> 1331/1331, bf16 718
# -> 747/751; argmax fp32 1192 -> 1248/1251, bf16 760 -> 730/771; 4 lost). Their pipelined loops (cp.async,
# which drops the evict_first hint) against plain loops with the hint (PIPELINE_MIN_TILES 16 / 32), H100,
# 2026-11-27, four runs, fp32 GB/s: amax 1157-1163 -> 974-1016 (8 tiles), 958-1001 (16), 1112-1173 (4 tiles
# a part); sum fast 1120-1178 -> 993-1036, kahan 1085-1147 -> 969-1018, 719-743 (16 tiles): they stay.
# More, shorter parts (H100, 2026-11-27, sweep_outer --dim -1 --shapes 16x262144, SHORT_SPLIT_PROGRAMS_PER_SM
# 4 / 8 / 16 / 32 with SUM_SHORT_PART_TILES 8 / 4 / 2 / 1), fp32 GB/s: amax 1101/1092 -> 1081-1170 (two
# runs), argmax 1088 -> 975-1072, sum fast 1170 -> 1081-1155, kahan 1072 -> 935-1087, fp64 1096 -> 1070-1157:
# nothing steadily faster. The same process timed amax (16, 262144) on three fresh inputs at 1101 / 1152 /
# 1156 GB/s (torch 930 / 877 / 874: 1.18x / 1.31x / 1.32x); a bare one-launch kernel writing the 16 x 16
# partial maxima of the same tiles read 1276-1355: the fused merge's last program (its atomic, the partial
# states' loads, the store) is the rest of this ~11 us call. Bare kernels of 128 / 256 one-tile parts read
# 1355-1477, but inside the op (plans injected, two inputs) they lost: amax fp32 1099/1146 -> 1022-1055,
# argmax 995/1051 -> 782-804 (the arrival counter and the merge over 128-256 partial states a row). Nor
# does a merge by 64-bit compare-and-swap on (key << 32 | arrivals) a row pay (a bare amax probe, the last
# arrival writing the result: 957-984 GB/s with 16 parts, 404-416 with 64, against the op's 1082-1145).
SUM_SHORT_PART_TILES = 8
# (Splitting the sums' and the extrema's long rows into parts, as CERTIFIED_EXP_16BIT_ROW_PART does, lost:
# bench/sweep_outer.py --dim -1 --shapes 1024x65536, H100, two runs, GB/s whole rows -> parts of 32768 /
# 16384 / 8192: fp32 fast 2637/2635 -> 2604/2602, 2601/2581, 2597/2597; kahan bf16 2406/2405 -> 2024-2149;
# amax bf16 2347/2375 -> 2052-2123; argmax fp32 2558/2538 -> 2380-2554, bf16 2276/2275 -> 1879-1986.)
# Long splits of the sums, the extrema and the exact filter (plan_reduction's wide_long_splits): a split
# chained inner first pass that is not the short parts of few long rows (SHORT_PART_TILES) and whose parts
# hold at least LONG_SPLIT_MIN_TILES tiles per lane -- 2^28 elements in one row -- runs
# LONG_SPLIT_PROGRAMS_PER_SM programs per SM (its parts) of LONG_SPLIT_WARPS warps, where its tile still
# gives every thread 16-byte vectors (else the plan as before), and, but for the exact filter,
# interleaves its parts where INTERLEAVE_PARTS says so: part p reads the row's tiles p, p + parts, ...
# (Pass.interleaved), so that the programs running at any moment read neighbouring tiles, not one stream
# each, chunk elements apart. The same chains in another order: each part's lanes run at most
# chunk / lanes tiles (Pass.depth).
# H100, bench/sweep_outer.py --dim -1 --shapes 1x268435456, GB/s, two runs each, 4 programs of 8 warps per
# SM consecutive -> interleaved -> 2 of 16 consecutive -> interleaved (torch 2963 / 2551 amax, 2881 / 1864
# argmax, 2964 / 2770 sum): amax fp32 2945/2944 -> 2954/2949 -> 2972/2972 -> 2988/2990, bf16 2741/2741 ->
# 2760/2761 -> 2773/2774 -> 2813/2814; argmax fp32 2869/2874 -> 2852/2858 -> 2947/2944 -> 2964/2956, bf16
# 2695/2703 -> 2694/2702 -> 2742/2741 -> 2792/2794; sum fast fp32 2961/2960 -> 2978/2974 -> 2984/2979 ->
# 3001/3002, kahan 2945/2943 -> 2944/2949 -> 2964/2968 -> 2989/2988, fp64 2975/2974 -> 2981/2976 ->
# 2998/2990 -> 3003/3001; bf16 fast 2837/2837 -> 2846/2847 -> 2831/2837 -> 2878/2870. fp64 over bf16 (2048
# lanes: 8-byte loads on 16 warps) lost 2877 -> 2656 and keeps its plan by the 16-byte rule. The short
# parts (16x262144) lost interleaved (amax fp32 1097-1155 -> 1074-1079) and keep consecutive tiles.
# Then, two runs, 4 of 8 (or 4) warps -> 2 of 16 per SM: exact fp32 2^28 2955/2956 -> 2974/2975 (torch 2966;
# consecutive parts: the exact filter's loop is not the chained one), but its 16x262144 (16 parts of 8
# tiles per lane instead of 32 of 4) 1016-1024 -> 941-945, hence LONG_SPLIT_MIN_TILES; pairwise 2^28 fp32
# (512 parts of 16 warps: its parts are power-of-two runs of tiles) 2944/2937 -> 2902/2905: it keeps its plan.
INTERLEAVE_PARTS = True
LONG_SPLIT_WARPS = 16
LONG_SPLIT_PROGRAMS_PER_SM = 2
LONG_SPLIT_MIN_TILES = 16
# Unsplit long rows: an inner first pass of one part, one row per program, whose lanes run at least
# LONG_SPLIT_MIN_TILES tiles (1024 x 65536). H100, bench/sweep_outer.py --dim -1 --shapes 1024x65536, GB/s,
# repeated runs (torch 2607 sum / 2609 amax / 2467 argmax fp32, 2233 sum bf16):
# - plain sums over 16-bit rows (plan_reduction's long_row_warps) on LONG_SPLIT_WARPS warps where the tile
#   still gives every thread 16-byte vectors (bf16 measured; fp16 taken for its same bytes): bf16 fast
#   2306/2326/2315/2317 -> 2430/2429/2441/2441 (kahan bf16 2305/2303 -> 2330/2329, not taken; fp32 fast
#   lost, 2608/2623 -> 2581/2579; amax / argmax fp32 no faster: 2592/2581 -> 2564/2562, 2480/2479 ->
#   2483/2493); the fp64 accumulator's tile (2048 lanes over 16-bit input) on the 8 warps that still
#   load 16-byte vectors of it, not its own 4: H200, 2026-12-01, bench/sweep_outer.py --dim -1 --modes
#   fast,fp64, bf16 1024x65536, fp64 3168/3112 -> 3202/3202 (LONG_SPLIT_WARPS = 8 as a variant, which cost
#   fast 3380/3427 -> 3042/3055);
# - the extrema and kahan over 4-byte rows (long_row_stages) with LONG_ROW_STAGES stages, not
#   LOOP_STAGES["inner"]: amax fp32 2592/2581 -> 2626/2612, argmax fp32 2480/2479 -> 2518/2519, kahan fp32
#   2545/2535 -> 2592/2608 (fast fp32 lost, 2608/2623 -> 2567/2584; fp64 2626/2626 -> 2645/2645 and
#   pairwise 2622/2644 -> 2607/2608 not taken; 2 stages: amax 2593/2598).
LONG_ROW_STAGES = 3
# The plain sums' lane tree (schedules/inner.py HALVES_MIN_LANES) over PLAIN_HALVES_MIN_LANES lanes or
# more: tree.tree_sum_halves -- each 16-byte vector, then the vectors' sums in halves, an order neither the
# warps nor the layout change -- instead of the generic adjacent-pairs tree (0: never). The choice
# follows the lanes alone, which a row's length sets, so a row gives the same bits alone and in a batch.
# H200, 2026-12-01, bench/sweep_outer.py --op sum --dim -1 --modes fast,pairwise,fp64, GB/s, adjacent
# pairs -> halves on every lane count (one run): fp32 fast / pairwise / fp64 1024x65536 3561 / 3618 / 3516
# -> 3602 / 3617 / 3553, 8192^2 3633 / 3730 / 3649 -> 3665 / 3728 / 3619, 16x262144 1372 / 1321 / 1344 ->
# 1385 / 1387 / 1351, 2^28 within 0.3%; bf16 1024x65536 3339 / 3377 / 3139 -> 3420 / 3372 / 3139, 8192^2
# 3435 / 2950 / 3339 -> 3495 / 3347 / 3385 -- but rows of 1024 and 256 on several rows a program (512 and
# fewer lanes) lost up to 3x: 65536x1024 fp32 3692 / 3760 / 3646 -> 2353 / 1350 / 3642, bf16 3449 / 3329
# / 3202 -> 2994 / 1588 / 2562, 262144x256 fp32 pairwise 3752 -> 1474 (there a row's vectors span the
# warps, whose halves go through shared memory before the lanes'). Hence the floor. With it (same sweep, two
# rounds, adjacent -> halves from 2048 lanes): fp32 1024x65536 fast 3583-3600 -> 3630-3654, fp64 3622-3625 ->
# 3665-3689, pairwise 3635-3660 -> 3636-3639; 8192^2 fast 3654-3676 -> 3689; bf16 8192^2 pairwise 2939-2992
# -> 3351-3399, fast 3347-3441 -> 3388-3510, 1024x65536 pairwise 3416-3466 -> 3339-3345; rows of 1024 and
# 256 unchanged (same tree); 16x262144 fp32 fast 1341-1348 -> 1291 (a 16 MiB call: 1372 and 1380 in the two
# gpu_suite runs after it, 1307 before).
PLAIN_HALVES_MIN_LANES = 2048
# Measured and not kept (H200, 2026-12-02, bench/sweep_outer.py --op sum --dim -1, two rounds, GB/s): the
# halves' warp levels in one shared-memory round (one tl.sum over a [ROWS, WARPS, 32] warps axis after the
# levels inside a thread: Triton's butterfly, xor WARPS/2 first, is the halves there) where the launcher
# saw 16-byte vector loads (aligned start, offsets multiples of 16 elements; an unaligned row kept a round
# a level). sm_90 barriers (bench/kernel_resources.py) fast fp32 1024x65536 13 -> 7, bf16 11 -> 2, 2^28
# 18 -> 9; same bits (H200: test_tree's halves kernel on 2..32 warps, test_schedules, test_gpu_only,
# test_sum_accuracy passed). Explicit -> one round: 1024x65536 fp32 fast 3630-3631 -> 3635-3638, fp64
# 3611-3613 -> 3609-3638; bf16 fast 3385-3393 -> 3449-3452 (+2%), pairwise 3399-3455 -> 3393-3402;
# 8192^2 within 1%; 16x262144 fp32 fp64 1362-1369 -> 1301-1311. The rounds were not what bounds them.
# Measured and not kept (H200, 2026-12-01, bench/sweep_outer.py --op sum --dim -1 --modes fast,fp64, two
# rounds, GB/s): the unsplit long rows of the plain sums split into single-wave parts -- one tile a part,
# the shape of the bare read that reached 0.96 of the copy (docs/read_ceiling.md) -- merged by the
# fused merge or a second launch. 1024x65536 fp32 fast / fp64 3633 / 3610-3635 -> 32 KiB parts on 32
# warps 1877-1888 / 1212-1216, with two launches 2099-2101 / 1499-1501, 16 KiB on 16 warps 2735-2754 /
# 1432-1435, 64 KiB on 32 warps 2109-2111 / 2003; bf16 fast 3449 -> 1222-2113. The library's pass in that
# shape costs what the bare read does not (the tree over 8192-16384 lanes, the state's writes).
# Not taken (same sweep, 1024 x 65536, two runs unless said): Welford's long rows on 4 / 8 / 16 warps
# (var fast bf16 2354/2350 on 2 -> 2368/2367, 2244/2226, 2351/2350; fp32 on 4 warps 2617/2617 -> 8:
# 2626/2626, 16: 2586/2587; fp64 within 1%); the stable exponential sum's on 8 / 16 warps (logsumexp
# fast fp32 2595 on 4 -> 2572, 2592; fp64 fp32 1707 -> 1602, 1707; bf16 fast 2260 -> 2257, 2289, one
# run) or on the default tile instead of STABLE_EXP_TILE (bf16 fast 2260 -> 2329, with 16 warps 2360,
# one run; fp32 fast 2595 -> 2561, fp64 1707 -> 1366).
# logsumexp's fp64 mode over 16-bit rows (its fp32 filter, then the recompute) splits rows of at least
# twice CERTIFIED_EXP_16BIT_ROW_PART elements into parts of that many (plan_reduction's long_row_part),
# where the rows alone would fill the GPU: 1024x65536 bf16 runs 8192 programs of 8192 elements instead
# of 1024 of 65536. bench/sweep_outer.py --dim -1, H100, two runs, GB/s of logsumexp fp64, unsplit ->
# parts of 32768 / 16384 / 8192: bf16 1024x65536 1660/1657 -> 1751/1753 -> 1769/1766 -> 1799/1799
# (4.9x -> 5.3x torch). The same split measured slower for every other strategy there (sum fast, pairwise,
# kahan, fp64, exact, amax, argmax, var, logsumexp fast: 1-15% slower with parts of 8192, e.g. kahan bf16
# 2371 -> 2149, var fast bf16 2378 -> 2140, fp32 sum fast 2635 -> 2595) and for fp32 input (logsumexp
# fp64 fp32 1704 -> 1384): they keep whole rows.
CERTIFIED_EXP_16BIT_ROW_PART = 8192
# A split of two inner passes runs as one launch: the last program of each row to finish merges the
# row's partial states (Plan.fused_merge). Saves a launch -- host time and the gap between kernels --
# on every split of few rows (16 x 262144, 2^28). The flag lets bench/ sweeps time both.
FUSE_INNER_MERGE = True
# Except for these strategies (precred.strategies ids: amax, amin), whose second inner pass launches as
# a programmatic dependent of the first where the GPU has programmatic launches (Plan.dependent_merge).
# H100, 2026-11-28, bench/sweep_outer.py --op amax --dim -1 --shapes 16x262144, three runs, GB/s fused ->
# two ordinary launches -> two launches, the second dependent: fp32 1104-1108 -> 1070-1077 -> 1186-1192,
# bf16 695-736 -> 662-664 -> 749-753. Measured the same way and kept fused: argmax fp32 1085 -> 1066-1068
# (bf16 668-703 -> 688-699), sum fast fp32 1126-1228 -> 1140-1181, kahan fp32 1101-1155 -> 1016-1021,
# exact fp32 706-1061 -> 454-534, logsumexp fast fp32 1058-1101 -> 1095-1099 but bf16 660-694 -> 676-679,
# var fast fp32 1040-1085 -> 984-1018.
PROGRAMMATIC_MERGE_STRATEGIES = frozenset({8, 9})
# With that merge, amax / amin split few long rows into more, shorter parts than the sums: (programs per
# SM, tiles per lane of a part) of the short split. H100, 2026-11-28, bench/sweep_outer.py --op amax
# --dim -1, two runs, GB/s (2, 8) as the sums -> (4, 4) -> (8, 2): fp32 16x262144 1189 -> 1183-1189 ->
# 1225-1228, 32x131072 1189 -> 1049-1051 -> 1186-1189, 8x1048576 1542-1544 -> 1515 -> 1628-1631,
# 4x4194304 1806-1813 -> 1786-1788 -> 1788-1789, 128x65536 1489-1494 -> 1603 -> 1598-1606; bf16
# 16x262144 751-753 -> 790-792 -> 745-747, 32x131072 747-751 -> 699 -> 753-755, 8x1048576 1092-1099 ->
# 1140 -> 1152-1157, 4x4194304 1467-1473 -> 1415-1421 -> 1413-1415, 128x65536 1106-1111 -> 1135-1143
# -> 1135. (Measured with the dependent merge only: the fused merge keeps the sums' split.)
# argmax measured the same way (H100, 2026-11-28, two runs, GB/s) and keeps the fused merge and the sums'
# split: fused -> dependent merge -> dependent with (8, 2) -> with (4, 4): fp32 16x262144 1046/1085 ->
# 1053/1004 -> 1034 -> 1088-1090, 8x1048576 1447-1450 -> 1427 -> 1387-1389 -> 1326, 4x4194304 1655 ->
# 1658 -> 1511 -> 1539 (torch 1589), 128x65536 1312/1344 -> 1344-1351 -> 1415 -> 1417; bf16 16x262144
# 665-667 -> 692-694 -> 611 -> 697-699, 4x4194304 1346-1376 -> 1350 -> 1205-1211 -> 1200.
VALUE_EXTREMA_SHORT_SPLIT = (8, 2)
# The indexed extrema's short split (programs per SM, tiles per lane), where set; None: the sums'. With
# the lanes merged by extremum_reduce, H100, 2026-11-28, bench/sweep_outer.py --op argmax --dim -1, three
# runs, GB/s None -> (4, 4) -> (8, 2): fp32 16x262144 1063/1063/1111 -> 1088/1088/1137 -> 1120-1176,
# 8x1048576 1473-1477 -> 1378-1382 -> 1536-1558, 4x4194304 1729-1732 -> 1632-1638 -> 1608-1631 (torch
# ~1580), 128x65536 1360-1402 -> 1499-1551 -> 1494-1549, 32x131072 1052-1101 -> 1019-1057 -> 1072-1090;
# bf16 16x262144 708-709 -> 704-716 -> 647-660, 4x4194304 1364-1415 -> 1265-1299 -> 1265-1301,
# 32x131072 672-707 -> 643-681 -> 629-659. No setting wins everywhere: None.
INDEXED_EXTREMA_SHORT_SPLIT = None
# A first pass with fewer than FIRST_PASS_MIN_PROGRAMS_PER_SM programs per SM gives each program fewer
# outputs (down to OUTER_MIN_WARPS' column block), then splits (plan_reduction). 4 and 8 measured on
# 16 x 262144 over dim 0 (bench/sweep_outer.py, H100, 2026-11-27, three runs, GB/s, 2 -> 4 -> 8): exact
# fp32 1163/1163/1165 -> 1183/1189/1186 -> 832/813/564 (fast 1369-1376 at 2; the 0.9x goal asks 1238),
# but exact bf16 734-736 -> 213-372 -> 487-494, fast bf16 848-913 -> 643-679, argmax bf16 810-874 ->
# 538-553; var, logsumexp and the other sum modes within noise or lost: 2 stays.
FIRST_PASS_MIN_PROGRAMS_PER_SM = 2
# Outer first passes in the registers layout narrow their column block down to this many warps, then
# split (bench/sweep_outer.py, H100: 4 was best or near it on every dim=0 shape).
OUTER_MIN_WARPS = 4
# Chained (non-pairwise) outer first passes may take the registers layout too (the sweep toggles
# this), when the reduced axis is at least OUTER_REGISTERS_MIN_RED long.
# (H200, 2026-11-28: the wide layout for logsumexp's fp64 mode over dim 0 (the certified fp32 filter
# over bf16) measured +22% / +34% on 65536x1024 / 8192^2 bf16 in bench/sweep_outer.py, but -6% / -6%
# (1024x65536 +7%) on bench/exp_suite.py's data: how many outputs the recompute takes moves with the
# data. fast lost 5-15% and fp32's fp64 mode 0-7%. Not taken.)
OUTER_CHAINS_IN_REGISTERS = True
OUTER_REGISTERS_MIN_RED = 64
# Warps of an outer first pass in the wide layout (short reduced axes, narrow kept ones), at most: more
# elements per thread, fewer warps to merge across. bench/sweep_outer.py --dim 0, H200, GB/s, two runs,
# no cap (4-8 warps) -> 2: 16x262144 bf16 sum fast 694/726 -> 933/933, fp64 529/530 -> 997/993, amax
# 712 -> 889, argmax 574/589 -> 964/904; 262144x256 fp32 fast 2728 -> 3147, fp64 2897 -> 3129, amax 2724
# -> 3114, argmax 2354 -> 2899; bf16 fast 2011 -> 2483, kahan 2088 -> 2305, argmax 1596 -> 2007; the rest
# within 3%. 1 warp was faster still for fast and amax (262144x256 fp32 3423 / 3371) but lost up to 45%
# on argmax and kahan bf16 (registers).
OUTER_WIDE_MAX_WARPS = 2
# Later outer passes (merging [parts, outputs] partial states) narrow their column block, down to this
# many columns (128 bytes of fp32 states), until 2 programs per SM run; 0 keeps the 128-column block.
# Without it few programs merged every part: 8 on 65536 x 1024 over dim 0, 2 on 262144 x 256.
# bench/sweep_outer.py, H100 (stop note of 2026-11-24's sixth session), GB/s 0 -> 32: bf16 pairwise
# 65536x1024 892 -> 1913, 262144x256 821 -> 1613; fp32 pairwise 262144x256 1375 -> 2344, 65536x1024
# 1805 -> 2484; fast 65536x1024 fp32 2410 -> 2534, bf16 1922 -> 2113. 64 was no better.
# 32 -> 4 columns (16 bytes of fp32 states; the states were written just before, read from L2): ncu, H200,
# var fast bf16 65536x1024 dim 0, its merge of 263 parts on 32 programs took 20 us next to the first
# pass's 40 (sum fast: 8 us next to 35). bench/sweep_outer.py --dim 0, H200, 2026-11-29, two runs each
# (within 1%), GB/s 32 -> 4: var fast bf16 65536x1024 2135 -> 2464, 4096^2 1454 -> 1535, 8192^2 2568 ->
# 2656, fp32 2978 -> 3264, 2064 -> 2170, 3383 -> 3460; var fp64 bf16 1694 -> 1901, 1120 -> 1200, fp32
# 2800 -> 3084; logsumexp fast bf16 65536x1024 2456 -> 2558, fp32 3327 -> 3402, fp64 bf16 1371 -> 1472;
# sum fast / kahan / fp64 bf16 65536x1024 2815 / 2431 / 2668 -> 2836 / 2461 / 2708 (kahan bf16 4096^2
# 1483 -> 1452-1467, the rest within 1%); 1024x65536 (4-8 parts) unchanged. Not taken: merging tiles of
# 8192 / 16384 elements with chains of 2 tiles (var 65536x1024 bf16 2371 / 2325, kahan bf16 1024x65536
# 2708 -> 2524), Welford's merges on tiles of 4096 instead of its first tile (65536x1024 bf16 2497, +1%).
STATE_PASS_MIN_COLUMNS = 4
# Merging passes with wide lanes (plan_reduction's state_pass_wide_lanes; the strategies in
# WIDE_LANES_STATE_STRATEGIES, precred.launch.plan_for): once narrowed below WIDE_LAYOUT_COLUMNS, a
# merging pass takes WIDE_LANES_STATE_TILE / columns lanes (chains of at least WIDE_LANES_TILES_PER_LANE
# tiles) on warps holding WIDE_LANES_PER_THREAD states a thread -- short chains, a deeper lane tree, a
# smaller depth (plan.Pass.depth) -- in place of the narrowed block's own lanes (the same tree as the
# full block's). Taken for logsumexp's certified pass alone: its certificate's margin grows with the depth
# (precred.bounds.certified_log_sum_margin), so a smaller one certifies more outputs. H200, 2026-11-29,
# bench/sweep_outer.py --dim 0, GB/s, one run each (default twice): logsumexp fp64 (certified pass) bf16
# 65536x1024 1116/1122 -> 2277 (tiles of 2048 with 8 states a thread 2239, of 4096 2303, chains of 1
# 2282), 262144x256 bf16 2331 -> 2335 (tiles of 4096 2411), 8192^2 1569/1600 -> 1559, 4096^2 633/629 ->
# 612, 1024x65536 even. The other strategies lost or barely moved: var fast bf16 8192^2 2640 -> 2528,
# 4096^2 1533 -> 1446, fp32 8192^2 3414 -> 3314; kahan bf16 4096^2 1457 -> 1371, 8192^2 2685 -> 2621;
# logsumexp fast -1-3% -- its strategy is also fp32 input's fp64 mode, which gained there (65536x1024
# 1613 -> 1673) and keeps the narrowed block's lanes with it; sum fast / fp64 65536x1024 +1%.
WIDE_LANES_STATE_STRATEGIES = frozenset({10})
WIDE_LANES_STATE_TILE = 1024
WIDE_LANES_TILES_PER_LANE = 2
WIDE_LANES_PER_THREAD = 4


def _warps(tile_elements: int) -> int:
    return 8 if tile_elements >= 4096 else 4 if tile_elements >= 1024 else 2 if tile_elements >= 256 else 1


# Software pipelining of the schedules' loops (tl.range(num_stages=S): the tiles go through shared
# memory by cp.async, S - 1 of them in flight, instead of loads that ptxas may place right before their
# use). Measured on an H200 with bench/sweep_stages.py (0 / 2 / 3 / 4 stages, figures in the stop note of
# 2026-11-23): the heavy accumulators gained most -- inner: exact bf16 2^28 2682 -> 3581 GB/s,
# 65536x1024 2081 -> 2459, fp64 fp32 2^28 3599 -> 4232, fast 65536x1024 fp32 3472 -> 3648; outer (3
# stages; 4 ran out of shared memory on a pass over exact partial states): fp64 1024x65536 dim 0 2314 ->
# 3425, fast 8192^2 dim 0 2809 -> 3478, exact bf16 1024x65536 dim 0 1294 -> 1764 -- while loops of few
# tiles lost (16x262144 fp32 exact, 2 tiles per lane: 567 -> 443), hence PIPELINE_MIN_TILES. Which
# strategies ask for it (plan_reduction's `pipelined`): precred.launch.PIPELINED_STRATEGIES.
LOOP_STAGES = {"inner": 4, "outer": 3}
PIPELINE_MIN_TILES = 8
# Unsplit inner first passes over 16-bit rows of at least PLAIN_16BIT_ROWS_MIN_RED elements run plain
# loops where the strategy asks for it (plan_reduction's plain_16bit_rows; precred.launch.
# PLAIN_16BIT_ROW_STRATEGIES): their loads then carry the L2 evict_first hint (schedules/steps.py), which
# Triton's cp.async drops. Under the protocol's L2 flush the hint spares the write-back of dirty lines a
# read would otherwise evict. H100, bench/sweep_outer.py --dim -1, bf16, GB/s, pipelined -> plain loop
# with the hint: 1024x65536 fast 2294 -> 2452, pairwise 2262 -> 2456, kahan 2227 -> 2376, fp64 2294 ->
# 2379, amax 2013 -> 2370, argmax 2113 -> 2270, logsumexp fp64 1546 -> 1530; 65536x1024 kahan 2262 ->
# 2401, fp64 2350 -> 2477, logsumexp fast 1932 -> 2125, fp64 1692 -> 1828. Lost: rows of 256 (kahan
# 2017 -> 1921, argmax 1984 -> 1753: 8 tiles of 32 lanes want the pipeline), var fast (7-15%) and exact
# (up to 3%), which keep it; fp32 rows gained nothing, split passes (16x262144, 2^28) and outer ones lost.
# A probe kernel (fp32 sums of 16 / 256 MiB in chunks per program, H100, do_bench, 2026-11-27): plain
# loads with no hint, evict_first, evict_last or .cg against the 4-stage pipelined loop -- no hint beat
# the pipeline (16 MiB: 1180-1510 GB/s across variants, and 1290-1750 for pipelined loops whose PTX is
# the same whatever the hint -- cp.async drops it -- i.e. noise of that size), and
# 256 MiB read 2665 GB/s in 1024 programs of 256 KiB against 2735 in 8192 of 32 KiB; splitting
# 1024x65536's rows into such parts did not gain in the library (CERTIFIED_EXP_16BIT_ROW_PART's note).
PLAIN_16BIT_ROWS_MIN_RED = 1024
# The exact filter's first passes (bench/sweep_state.py exact, H200; precred.launch.plan_for): 1024-element
# tiles over many rows, and over a strided axis wide enough for the registers layout 4096 (fp32) / 2048
# (16-bit) elements (since raised for 16-bit input: EXACT_OUTER_TILE_MOMENTS' note).
# 16-bit rows of 256 took the pipelined loop before the word loads (EXACT_PLAIN_16BIT_ROWS_MIN_RED's note):
# H100, 2026-11-28, 262144x256 bf16, bench/sweep_outer.py --modes exact --dim -1, two rounds, GB/s
# 2110-2114 against the plain loop with vector lanes (tiles of 512 / 1024 / 2048: 1925 / 1936 / 1838),
# rows tiles of 512 / 2048 (2117-2125 / 2103-2105), 3 pipeline stages (2118-2122), 2 (1799-1800).
EXACT_ROWS_TILE = 1024
EXACT_ROWS_MIN_OUTPUTS = 1024
EXACT_OUTER_TILE = {4: 4096, 2: 16384}
EXACT_OUTER_MIN_INNER = 512
# The exact filter over a strided axis, 16-bit input (schedules/outer.py exact_tile_part): each tile's
# lanes merged in registers first (EXACT_OUTER_TILE_MOMENTS: the input element sizes that take it), so a
# column keeps one state (8192^2 dim 0 bf16: 121 -> 72 registers with tiles of 8192 instead of 2048),
# on half the split's programs (EXACT_OUTER_16BIT_PROGRAMS_PER_SM: fewer parts, fewer partial states
# to write and merge); and every exact plan's merging outer passes narrow their column block down to
# EXACT_STATE_PASS_MIN_COLUMNS (8 fp64 states, 64 bytes) where the default stopped at 32 then (4 since): the merge of
# 521 parts of 65536x1024 over dim 0 ran on 32 programs (H200, ncu: 15.9 us of a 59 us call; fast's
# 8.8). H100, bench/sweep_outer.py --op sum --modes fast,exact --dim 0, bf16, GB/s of exact (fast
# 2120-2250 on the first three): default -> columns of 8 -> tile moments at 8192 and 2 programs per SM
# with columns of 8: 65536x1024 1783 -> 1874 -> 1985, 8192^2 1974 -> 1987 -> 1999, 1024x65536 2053 ->
# 2060 -> 2065, 262144x256 (narrower than EXACT_OUTER_MIN_INNER: neither tile moments nor the halved
# split) 1592 -> 1654. Tile moments alone at 2048 / 4096 / 16384 elements: within 1-3% / +0-5% / -5-14%.
# The H200 wants more programs than that H100 measurement's 2 per SM: H200, 2026-11-28, same sweep with
# --dtypes bfloat16,float16, two rounds, GB/s of exact at 2 -> 3 -> 4 -> 6 programs per SM (fast in
# brackets): bf16 1024x65536 2553/2626 -> 2646/2665 -> 2661/2663 -> 2481/2495 (2913-2921), 8192^2
# 2492/2483 -> 2685/2618 -> 2725/2656 -> 2477/2461 (2836-2842), 65536x1024 2501/2497 -> 2547/2548 ->
# 2521/2556 -> 2417/2412 (2734-2740); fp16 1024x65536 2581/2558 -> 2738/2689 -> 2680/2713, 8192^2
# 2498/2522 -> 2701/2640 -> 2661/2663, 65536x1024 2457/2461 -> 2544/2572 -> 2559/2547; 262144x256 (the
# narrow layout) unmoved. 3 and 4 read alike; 3 is the nearer to the H100's 2 (not remeasured there).
# Since fast's larger tiles there (OUTER_16BIT_ACC_TILE_BYTES), tiles of 16384 on 2 programs per SM (as
# many elements in flight per SM as tiles of 8192 on 4): H200, 2026-11-29, same sweep, three runs each
# (runs spread 1-3%), exact's GB/s / ratio to fast, 8192 on 3 -> 16384 on 2: bf16 65536x1024 2510-2524 /
# 0.88-0.89 -> 2554-2556 / 0.90; 1024x65536 2613-2703 / 0.88-0.91 -> 2640-2722 / 0.88-0.91; 8192^2
# 2586-2618 / 0.88 -> 2604-2620 / 0.88-0.89; fp16 2540-2554 -> 2576-2592, 2635-2713 -> 2664-2749,
# 2606-2692 -> 2643-2725 (0.89-0.92); 4096^2 and 16x262144 within the runs' spread; 262144x256 (the
# narrow layout) unmoved. An earlier round of four runs read the same. Tiles of 16384 on 3 programs lost
# 1-3%; merging passes on 4 columns (EXACT_STATE_PASS_MIN_COLUMNS) moved within the runs' spread.
EXACT_OUTER_TILE_MOMENTS = (2,)
EXACT_OUTER_16BIT_PROGRAMS_PER_SM = 2
# Each tile's tree in those tile moments summed by the plain fp64 tree, its share of the bound taken from
# the tile's largest magnitude (strategies/exact.py, "A tile's tree bounded by its largest magnitude";
# schedules/outer.py exact_tile_part): one fp64 addition an element instead of two, an fp32 maximum
# more (sm_90, bench/kernel_resources.py, 262144x256 bf16 over dim 0, the first pass: 896 instructions
# either way, fp64 adds 128 -> 80 and conversions 80 -> 88 a loop body, 136 -> 128 registers). Written
# after the ncu breakdown in NARROW_OUTER_MIN_INNER's note (exact's first pass 49.4 us where fp64's, one
# fp64 addition an element, took 47.7). Measured and not taken: H100, 2026-12-08, bench/sweep_outer.py
# --op sum --modes fast,exact --dim 0 --dtypes bfloat16,float32 --repeat 2 --variant
# "bound:EXACT_TILE_MAGNITUDE_BOUND=True", exact GB/s default / bound, two rounds: bf16 262144x256
# 1973, 1966 / 1965, 1965; 131072x384 1823, 1823 / 1820, 1784; 65536x1024 2049, 2046 / 2054, 2045;
# fp32 262144x256 2491, 2496 / 2483, 2492; 8192^2 2534, 2525 / 2562, 2524 (fast alike either way):
# within the runs' spread, the instructions saved are not the time. Beside it on 262144x256 bf16
# (exact GB/s, two rounds; default 1962, 1974): merging passes of 1 column 1913, 1919 and of 2 1972,
# 1965 (NARROW_STATE_PASS_MIN_COLUMNS), RECOMPUTE_PROGRAMS_PER_SM=1 1968, 1967, the recompute without
# PDL 1941, 1928, exact's merges with wide lanes (WIDE_LANES_STATE_STRATEGIES={7, 10}) 1948, 1936, with
# the bound too 1949, 1942: none better. The CPU suite's exact and sum tests pass with it on; the
# CUDA test_exact and test_sum_accuracy with it on: 165 passed, 4 skipped.
EXACT_TILE_MAGNITUDE_BOUND = False
# Wide strided axes of 16-bit input (four warps of 16-byte vectors wide and more, a reduced axis of at
# least OUTER_REGISTERS_MIN_RED): first passes of the strategies in OUTER_16BIT_ACC_TILE_STRATEGIES hold
# OUTER_16BIT_ACC_TILE_BYTES[accumulator bytes] of accumulators per tile instead of ACC_TILE_BYTES: 8192
# elements, 4 lanes of 16-byte vectors a thread (two before) -- as many bytes loaded per tile as over fp32
# input (ncu, H200, sum fast bf16 65536x1024 dim 0 before: DRAM 83% busy, issue slots 27%, 24% occupancy).
# H200, 2026-11-29, bench/sweep_outer.py --dim 0, bf16 / fp16, two runs each (within 1%), GB/s 16 KiB ->
# this: sum fast bf16 8192^2 2832 -> 2964, 65536x1024 2708 -> 2808, 1024x65536 2903 -> 2981, 4096^2 1702
# -> 1757 (fp16 alike, +5%); sum fp64 (64 KiB of fp64 accumulators) bf16 2709 -> 2813, 2548 -> 2660, 2780
# -> 2829, 1550 -> 1607; logsumexp fast bf16 2390 -> 2697, 2182 -> 2468, 2440 -> 2700, 1413 -> 1484 (fp16
# alike); its certified pass (fp64 mode) bf16 1576 -> 1554, 1044-1055 -> 1044-1053, 1462 -> 1512, 1314 ->
# 1311, fp16 1024x65536 1044 -> 1244, the rest within 2%; amax bf16 2423 -> 2661, 2333 -> 2554, 2537 ->
# 2681, 1520 -> 1571; argmax 2375 -> 2610, 2193 -> 2430, 2459 -> 2620, 1367 -> 1407. kahan on it (the full
# warps, not the heavy state's halves) lost 5-6% (8192^2 2710 -> 2568): not taken. fp32 input keeps
# ACC_TILE_BYTES: TILE_BYTES bounds its tile (4096 elements) first.
OUTER_16BIT_ACC_TILE_BYTES = {4: 32768, 8: 65536}
OUTER_16BIT_ACC_TILE_STRATEGIES = frozenset({0, 3, 4, 5, 8, 9, 10})
# kahan keeps its lane chains there: each tile's lanes summed first (one compensated pair a column, on
# this larger tile and fast's warps; the tile's sum by the TwoSum tree, or in fp64 split into a pair as
# inner.py's FP64_LEAVES) measured slower. H200, 2026-11-29, bench/sweep_outer.py --op sum --dim 0, two
# runs (within 0.5%), GB/s of kahan, chains / fp64 tile sums / fp32 TwoSum trees / fp64 tile sums at 4
# programs per SM: bf16 1024x65536 2697 / 2430 / 2607 / 2617, 8192^2 2690 / 2436 / 2604 / 2583, 65536x1024
# 2469 / 2267 / 2434 / 2491, 262144x256 2583 / 2550 / 2576 / 2550, 4096^2 1471 / 1434 / 1542 / 1513 (fp16
# alike; fast 2840-2983, 4096^2 1767). Not kept (session 42's stop note).
# Narrow strided axes: at least NARROW_OUTER_MIN_INNER columns, fewer than OUTER_MIN_WARPS warps of
# 16-byte vectors (262144x256 over dim 0). There, first outer passes take the registers layout from one
# warp wide (plan_reduction's outer_min_warps), on tiles of NARROW_OUTER_TILE_BYTES (Welford: of
# WELFORD_NARROW_OUTER_TILE elements; the merging passes' tiles too), split for NARROW_OUTER_PROGRAMS_PER_SM
# programs per SM, merging passes narrowed down to NARROW_STATE_PASS_MIN_COLUMNS columns -- instead of
# the wide layout's chains (the exact filter's 16 lanes of 128 columns: 232 registers, ncu on the H200:
# DRAM 50% busy, 56 us where fast's pass took 41; var fast bf16: 198 registers, 2 warps, 12% occupancy,
# DRAM 46% busy). The strategies: NARROW_OUTER_STRATEGIES (precred.strategies ids: the plain sums, kahan,
# logsumexp's fp32 passes, the certified fp32 pass, the exact filter -- with tile moments on fp32 input
# there too, which EXACT_OUTER_TILE_MOMENTS gives wide axes of 16-bit input alone) and Welford
# (precred.launch._narrow_outer_tile).
# Exact, first: H100, bench/sweep_outer.py --op sum --modes exact --dim 0, 262144x256 bf16, GB/s (fast
# 2000-2010), two runs each: wide chains 1615-1647; registers layout at 2 / 4 / 8 / 12 / 16 programs per
# SM (tiles of 8192, columns 8, 3 stages) 1186-1206 / 1723-1733 / 1865-1866 / -- / --; at 8 programs,
# tiles of 16384 and columns of 4: 4 stages 1902-1905, 3 stages 1914-1963; 12 / 16 programs there 1817 /
# 1660; tiles of 8192 1888-1890; columns of 8 1879-1891.
# The rest, H200, 2026-11-29, bench/sweep_outer.py --dim 0, two runs each (same within 1%), GB/s, wide ->
# tiles of 8192 -> 16384 elements: sum fast bf16 262144x256 2561 -> 2750 -> 2833, 131072x384 2246 ->
# 2392 -> 2585; fp32 3211 -> 3510 -> 3484, 2921 -> 3279 -> 3237; kahan bf16 2311 -> 2533 -> 2588, 1991
# -> 2106 -> 2312; fp32 3241 -> 3398 -> 3343, 2965 -> 3161 -> 3088; fp64 bf16 2226 -> 2612 -> 2672,
# 1935 -> 2191 -> 2443; fp32 3137 -> 3425 -> 3385, 2870 -> 3176 -> 3132; logsumexp fast bf16 2000 ->
# 2452 -> 2428, 1710 -> 2030 -> 2273; fp32 2865 -> 3366 -> 3304, 2511 -> 3109 -> 3040; fp64 (certified
# fp32 pass) bf16 1943 -> 2363 -> 2343, 1698 -> 2016 -> 2195; logsumexp fp64 on fp32 (fp64 states)
# 1320 -> 1029 -> 242 (spills): not taken. Hence 32 KiB tiles (16-bit: 16384 elements, fp32: 8192).
# 4 programs per SM at tiles of 8192: bf16 fast 2330, 12 at 4096: 2468 (and lower elsewhere).
# The exact filter on fp32 (same sweep, --modes fast,exact, two runs): its heavy default -> this rule with
# tile moments: 262144x256 2907/2899 -> 3326/3268 (fast 3510), 131072x384 2603/2645 -> 3022/3017 (fast
# 3277). Exact on bf16 (the rule before) against 6 / 12 programs per SM, tiles of 16 / 64 KiB: 262144x256
# 2402/2393 -> 2350 / 2375 / 2390 / 2359, 131072x384 2197/2195 -> 1922 / 2144 / 2053 / 2125.
# Welford (var), same sweep, GB/s fast / fp64, wide -> tiles of 1024 -> 8192: bf16 262144x256 1547/1260 ->
# 1843/1460 -> 2351/2127, fp32 2584/2305 -> 2833/2520 -> 3278/3171; tiles of 8192 against 1024: bf16
# 131072x384 1797/1280 -> 2220/1732, 65536x320 1116/831 -> 1484/1047, fp32 131072x384 2728/2420 ->
# 3009/2875, 65536x320 1795/1605 -> 2137/1989. Not taken there: tiles of 4096 / 16384 (bf16 262144x256 2096
# / 2067; 16384 at 6 programs per SM 2347), 6 / 12 / 16 programs per SM at tiles of 8192 (2340 / 2193 /
# 1982; 4 at tiles of 1024: 1839 against 1843), 3 or 4 stages (2319 / 2373; 131072x384 1977 / 2170), merging
# passes of 2 or 8 columns (2344 / 1680; fp32 131072x384 3097 at 2). Four warps wide and more (65536x1024):
# unchanged.
# Rechecked for the exact filter after fast's later gains (issue 7's miss, exact / fast 0.88-0.90 on
# 262144x256 bf16 over dim 0): H100, 2026-12-07, bench/sweep_outer.py --op sum --modes fast,exact --dim 0
# --dtypes bfloat16 --repeat 2, GB/s fast / exact, 262144x256 then 131072x384: these constants 2224-2225 /
# 1965-1996, 2028-2030 / 1813; tiles of 16 KiB 2151-2154 / 1910-1950, 1955-1956 / 1731-1732; of 64 KiB
# 2226-2229 / 1844-1862, 2016-2026 / 1689-1721; 6 programs per SM 2199-2203 / 1940-1941, 1981-1987 /
# 1690-1702; 12 2173-2178 / 1896-1908, 1991-1992 / 1713-1725: none better. Where the exact call's time
# goes (ncu, same case, one call's kernels; fast / fp64 / exact): the first pass (1024 programs of one warp,
# one wave) 46.5 / 47.7 / 49.4 us at 88 / 85 / 83% of DRAM (104 / 226 / 136 registers), the merging pass
# (64 programs over 4-column blocks of the 1024 parts' states: 4, 8, 16 bytes a state) 5.9 / 6.1 / 8.1 us,
# exact's recompute launch with every flag set 3.2 us (its 256 programs read their flags and leave);
# do_bench 60.1 / 63.0 / 68.2 us. The miss is those three shares together, none of them alone.
NARROW_OUTER_MIN_INNER = 256
NARROW_OUTER_TILE_BYTES = 32768
NARROW_OUTER_PROGRAMS_PER_SM = 8
NARROW_STATE_PASS_MIN_COLUMNS = 4
NARROW_OUTER_STRATEGIES = frozenset({0, 1, 3, 7, 10})
EXACT_STATE_PASS_MIN_COLUMNS = 8
# The exact filter over rows (schedules/inner.py exact_input_part). 16-bit rows of many outputs take the
# plain loop with the evict_first hint (EXACT_PLAIN_16BIT_ROWS; rows of at least PLAIN_16BIT_ROWS_MIN_RED
# elements, on tiles of EXACT_VECTOR_ROWS_TILE), any plain loop of the filter over the input loads a
# tile ahead, and 16-bit ones keep lanes of 16-byte vectors (EXACT_VECTOR_SUMS).
# H100, bench/sweep_outer.py --dim -1 --modes fast,exact, GB/s, pipelined (the plan before) -> plain
# with prefetch -> with vector lanes, 2048-element tiles: bf16 8192^2 2194 -> 2173 -> 2264, 65536x1024
# 2236 -> 2185 -> 2264, 1024x65536 2179 -> 2194 -> 2289; 16x262144 636 -> 649 -> 633 (noise: its split
# parts are plain loops anyway). Left out: vector lanes on fp32 rows (8192^2 2644 -> 2551) and on
# pipelined 16-bit rows (8192^2 2191 -> 2159), 4096- and 8192-element tiles (2238, 2164 on 8192^2),
# the plain loop without prefetch (within 1% of it). Rows of 65536 (H100, 2026-11-27, two runs, GB/s, tiles
# of 2048 -> 4096 -> 8192): 1024x65536 2319/2313 -> 2293/2292 -> 2276/2276 (fast 2536-2570, on the 16
# warps of LONG_ROW_STAGES' note).
# Rows of at most EXACT_VECTOR_SHORT_ROWS_MAX_RED take tiles of EXACT_VECTOR_SHORT_ROWS_TILE: more,
# smaller programs (8192^2: 8192 programs of one row on 2 warps instead of 4096 of two rows on 4;
# 65536x1024: 16384 of 4 rows instead of 4096 of 16. ncu of the 8192^2 filter before, H100: 52.5 us,
# DRAM 77% (fast: 88%), 2.59 waves of 12 programs per SM). Rows of 1024 and 8192 measured, those
# between not. bench/sweep_outer.py --dim -1 --modes fast,exact --dtypes bfloat16, H100, two runs, GB/s of
# exact at tiles of 2048 -> 1024 -> 512: 8192^2 2302/2302 -> 2325/2326 -> 2354/2354, 65536x1024
# 2352/2352 -> 2362/2364 -> 2405/2406 -- but 1024x65536 2301/2303 -> 2220/2224 -> 1677/1678.
EXACT_PLAIN_16BIT_ROWS = True
EXACT_VECTOR_ROWS_TILE = 2048
EXACT_VECTOR_SHORT_ROWS_TILE = 512
EXACT_VECTOR_SHORT_ROWS_MAX_RED = 8192
EXACT_VECTOR_SUMS = True
# 16-bit rows of EXACT_PLAIN_16BIT_ROWS_MIN_RED to EXACT_WORD_LOADS_MAX_RED elements (even lengths and
# offsets, 4-byte aligned) take the plain loop (tiles of EXACT_VECTOR_SHORT_ROWS_TILE) and are read as int32
# words, four tiles in flight (schedules/inner.py exact_word_part). H100, 2026-11-28, bench/sweep_outer.py
# --op sum --modes exact --dim -1 bf16, two rounds, GB/s, vector lanes -> words in two alternating
# buffers: 65536x1024 2408/2406 -> 2477/2475, but 8192^2 2368/2364 -> 2351/2350 and 1024x65536 2337/2337
# -> 2093/2095 (48 -> 72 registers at its 2048-element tiles). H200, 2026-11-28, same sweep, two rounds
# (fast 3345-3558 on the three): rows of 256, pipelined -> words (two buffers) 2610-2621 -> 3068-3073
# (the plain loop with vector lanes lost there, H100: 2110 -> 1925); then words converted to fp64 by
# word_halves' F2F.F64.BF16, two buffers -> four: 262144x256 3077-3099 -> 3216-3231, 65536x1024
# 3142-3166 -> 3279-3301 (the high half of a bf16 word masked into fp32 instead of converted: 3207-3224,
# 3290-3295, 8192^2 3267-3274 against 3219-3239; bf16 words are widened by shifts again since -- the
# interpreter's conversion is wrong on subnormals, word_halves' note -- four buffers with them: 3249-3259,
# 3300-3303, 8192^2 3207-3209); words at rows of 8192: 8192^2 3077-3084 -> 3277-3284 (fp16 3142-3151 ->
# 3239-3254); at rows of 65536 none (1024x65536 bf16 3073-3082 -> 3066, fp16 3068-3075 -> 2521-2524;
# tiles of 512 there 2977-2981 / 2909-2915). Measured, not taken: a register cap (maxnreg) of 40 / 32 /
# 56 on the two-buffer loop (262144x256 3039 -> 2925 / 1680 / 3028), tiles of 1024 (262144x256 3039 ->
# 2955, 65536x1024 3125 -> 3042), unmasked loads of whole tile pairs (the loop's masks: 119 -> 113
# instructions per 16 elements, ptxas still moving a buffer; not run). Rows of fewer than 256 elements
# keep the pipelined loop, not measured. Rows of 65536 split into parts of 4096 / 8192 / 16384 (plan_reduction's
# long_row_part; parts of 512-element tiles on the plain loop, word loads up to 16384 / vector lanes) lost
# (H200, same sweep, two rounds, 1024x65536 bf16 2996-2999 -> 2783-2785 / 2970-2977 / 2979-2987 / 2958-2970;
# fp16 3039-3044 -> 2745-2747 / 2887-2897 / 2861-2865 / 2970-2973).
EXACT_WORD_LOADS = True
EXACT_WORD_LOADS_MAX_RED = 8192
EXACT_PLAIN_16BIT_ROWS_MIN_RED = 256
# Shared memory for the S - 1 tiles in flight: 192 KiB, what 3 stages of 4096-element tiles of the exact
# filter's partial states (3 arrays of 8 bytes) took on the H200 next to the kernel's own scratch (the
# hardware limit is 227 KiB per program; 4 stages asked for 288 KiB and failed to launch).
PIPELINE_SMEM_BYTES = 192 * 1024


def state_bytes(accumulator_size: int) -> int:
    """Bytes of one partial state between passes, the largest of any strategy: two accumulator arrays
    and an 8-byte third (Welford's fp64 count, the exact filter's fp64 bound, an extremum's index)."""
    return 8 + 2 * accumulator_size


def _loop_stages(p: "Pass", first: bool, element_size: int, accumulator_size: int, plain_16bit_rows: bool,
                 plain_rows_min_red: int, max_stages: int | None = None) -> int:
    """Stages for pass p of a pipelined plan: max_stages (default LOOP_STAGES[schedule]), fewer when
    S - 1 tiles would not fit in PIPELINE_SMEM_BYTES (a tile: the input's elements in a first pass, else
    partial states of at most state_bytes(accumulator_size) each), 1 (a plain loop) for loops of fewer
    than PIPELINE_MIN_TILES tiles."""
    if p.tiles_per_lane < PIPELINE_MIN_TILES:
        return 1
    if (plain_16bit_rows and first and p.schedule == "inner" and element_size == 2 and p.parts == 1
            and p.red >= plain_rows_min_red):
        return 1
    tile_bytes = p.lanes * p.block_kept * (element_size if first else state_bytes(accumulator_size))
    return _stages_fitting(max_stages or LOOP_STAGES[p.schedule], tile_bytes, PIPELINE_SMEM_BYTES)


def _stages_fitting(max_stages: int, tile_bytes: int, smem_bytes: int) -> int:
    """The most stages, up to max_stages, whose S - 1 tiles in flight fit smem_bytes (1: a plain loop)."""
    return min(max_stages, 1 + smem_bytes // tile_bytes)


# Pairwise passes merge at most this many tiles per part with the kernel's binary counter
# (schedules/tree.py: COUNTER_TILES = 2^7 needs its 8 levels); a longer reduction is split into parts.
COUNTER_TILES = 128


def _narrow_lanes(lanes: int, red: int, floor: int, tiles: int | None = None) -> int:
    """Halve the lanes until each runs `tiles` (default MIN_TILES_PER_LANE) tiles over `red` elements
    (not below `floor`). Constants are read at call time, not bound as defaults, so that bench/ sweeps
    setting precred.plan's constants reach them."""
    tiles = MIN_TILES_PER_LANE if tiles is None else tiles
    while lanes > floor and red < tiles * lanes:
        lanes //= 2
    return lanes


def _fit_lanes(lanes: int, red: int, whole_tree: bool) -> int:
    """No more lanes than the reduced axis needs; chained lanes also narrowed (pairwise keeps its
    lanes: every tile is one tree)."""
    lanes = min(_pow2_at_least(red), lanes)
    return lanes if whole_tree else _narrow_lanes(lanes, red, 1)


def _chunk_and_parts(red, lanes, parts_wanted, max_tiles):
    """Reduced elements per part (a multiple of lanes; lanes times a power of two when max_tiles is set,
    so that counter trees of consecutive passes add up to one tree over the row) and the part count."""
    chunk = -(-red // parts_wanted)
    if max_tiles:
        chunk = lanes * min(max_tiles, _pow2_at_least(-(-chunk // lanes)))
    else:
        chunk = -(-chunk // lanes) * lanes
    return chunk, -(-red // chunk)


def _inner_pass(outer, red, inner, parts_wanted, whole_tree, tile_elements, block_limit, short_part_tiles=0,
                min_tiles_per_lane=None):
    rows = outer * inner
    lanes = min(_pow2_at_least(red), tile_elements)
    if not whole_tree:
        lanes = _narrow_lanes(lanes, red, MIN_LANES, min_tiles_per_lane)
    block_rows = max(1, min(_pow2_at_least(rows), tile_elements // lanes, block_limit))
    if whole_tree and red <= lanes and block_rows < _warps(lanes * block_rows):
        # Pairwise rows of one tile (no loop): a warp per row at least, up to twice the tile, so that
        # the rows' trees need no step across warps. bench/sweep_outer.py --dim -1, H100, GB/s, two runs:
        # fp32 65536x1024 4 rows on 8 warps 2563/2562 (0.98x torch) -> 8 rows on 8 warps 2696/2696.
        block_rows = max(1, min(_warps(lanes * block_rows), _pow2_at_least(rows), block_limit,
                                2 * tile_elements // lanes))
    if short_part_tiles:   # short_part_tiles tiles per lane in each part; the rows per program stay
        lanes = _narrow_lanes(lanes, -(-red // parts_wanted), MIN_LANES, short_part_tiles)
    # Pairwise: parts of a power of two tiles (at most COUNTER_TILES) in a pipelined loop, each thread's
    # share of a tile summed in the thread, the shares merged across tiles by the binary counter, the
    # threads' totals by the tree's last levels (schedules/inner.py, TILE_COUNTER); a part of one tile
    # is that tile's tree alone, the chained lanes' code. bench/sweep_outer.py --dim -1, H100, GB/s of
    # the previous plan (one tile per program and part, merged by later passes) -> a whole tree per tile
    # and the counter over tile sums: fp32 1024x65536 2474/2485 -> 2602/2617, 8192^2 2406 -> 2685,
    # 16x262144 999/1001 -> 1066/1031; bf16 1024x65536 2056/2069 -> 2224/2229 (torch 2615 / 2604 / 963 /
    # 2223) -> the counter over threads' shares (as now): fp32 1024x65536 2632/2629, 8192^2 2694/2709,
    # 2^28 2931/2940 (fast 2964); bf16 1024x65536 2251/2253 (fast 2262/2265), 2^28 2788 (fast 2835).
    # One-tile parts (65536x1024 bf16) measured slower through the counter's code (1831 vs 2393 GB/s),
    # hence the chained code there.
    chunk, parts = _chunk_and_parts(red, lanes, parts_wanted, COUNTER_TILES if whole_tree else 0)
    return Pass("inner", outer, red, inner, lanes, block_rows, chunk, parts, _warps(lanes * block_rows),
                tile_counter=whole_tree and chunk > lanes)


# The wide layout's tile row (schedules/outer.py's passes with vector == 0): this many columns, 512 bytes
# of fp32 in one coalesced run.
WIDE_LAYOUT_COLUMNS = 128


def _outer_pass(outer, red, inner, parts_wanted, whole_tree, tile_elements, block_limit, vector):
    """A pass of the outer schedule over [lanes, block_inner] tiles.

    vector > 0, the registers layout (first passes, reading the input): one warp spans 32 * vector
    contiguous columns (vector elements = 16 bytes per thread) and the warps sit side by side along
    the columns, so each thread holds its columns of every lane: the lane tree stays in registers.
    vector == 0, the wide layout (passes over partial states, and first passes plan_reduction keeps
    wide): WIDE_LAYOUT_COLUMNS columns and the lanes spread over the warps.
    whole_tree (pairwise): the lanes' tiles are merged by the binary counter, whose tree over a part
    has depth ceil(log2(chunk)).
    """
    if vector:
        block_inner = max(1, min(_pow2_at_least(inner), 8 * 32 * vector, tile_elements // 2, block_limit))
        warps = max(1, min(8, block_inner // (32 * vector)))
        # Every thread holds tile_elements / 256 elements of the tile, whatever the warp count.
        lanes = _fit_lanes(max(2, _pow2_at_most(tile_elements * warps // (8 * block_inner))), red, whole_tree)
    else:
        # At most tile / WIDE_LAYOUT_COLUMNS lanes, so that a tile row spans WIDE_LAYOUT_COLUMNS columns.
        lanes = _fit_lanes(max(2, tile_elements // WIDE_LAYOUT_COLUMNS), red, whole_tree)
        block_inner = max(1, min(_pow2_at_least(inner), tile_elements // lanes, block_limit))
        warps = _warps(lanes * block_inner)
    chunk, parts = _chunk_and_parts(red, lanes, parts_wanted, COUNTER_TILES if whole_tree else 0)
    return Pass("outer", outer, red, inner, lanes, block_inner, chunk, parts, warps, tile_counter=whole_tree)


def _wide_lanes_state_pass(red: int, inner: int, block: int) -> Pass:
    """A merging outer pass over `red` partial states of `inner` outputs on `block` columns, its lanes
    widened to the block (WIDE_LANES_STATE_STRATEGIES' note): WIDE_LANES_STATE_TILE / block lanes, narrowed
    to chains of at least WIDE_LANES_TILES_PER_LANE tiles, WIDE_LANES_PER_THREAD states a thread."""
    lanes = _narrow_lanes(min(_pow2_at_least(red), max(2, WIDE_LANES_STATE_TILE // block)), red, 1,
                          WIDE_LANES_TILES_PER_LANE)
    chunk, parts = _chunk_and_parts(red, lanes, 1, 0)
    warps = max(1, min(8, lanes * block // WIDE_LANES_PER_THREAD // 32))
    return Pass("outer", 1, red, inner, lanes, block, chunk, parts, warps)


def _vector_loads(lanes: int, element_size: int, warps: int) -> bool:
    """Whether a tile of `lanes` elements still gives each thread of `warps` warps 16-byte vectors."""
    return lanes * element_size >= 16 * 32 * warps


def _programs(p: Pass) -> int:
    per_part = p.outer * p.inner
    return -(-per_part // p.block_kept) if p.schedule == "inner" else p.outer * -(-p.inner // p.block_kept)


@lru_cache(maxsize=4096)
def plan_reduction(outer: int, red: int, inner: int, *, inner_contiguous: bool, whole_tree: bool,
                   sm_count: int, element_size: int = 4, tile_elements: int | None = None,
                   split_min_bytes: int | None = None, heavy_state: bool = False,
                   accumulator_size: int = 4, pipelined: bool = False,
                   short_part_tiles: int | None = None, min_tiles_per_lane: int | None = None,
                   plain_16bit_rows: bool = False, plain_rows_min_red: int | None = None,
                   acc_tile_bytes: int | None = None,
                   registers_first_stages: int | None = None, long_row_part: int = 0,
                   wide_long_splits: bool = False, interleave_long_splits: bool = False,
                   long_row_warps: int = 0, long_row_stages: int | None = None,
                   dependent_merge: bool = False, short_split_programs_per_sm: int | None = None,
                   split_programs_per_sm: int | None = None, state_pass_min_columns: int | None = None,
                   outer_min_warps: int | None = None, state_pass_wide_lanes: bool = False) -> Plan:
    """Plan the reduction of an (outer, red, inner) view; red >= 1, outer * inner >= 1.

    inner_contiguous: the kept inner axis has unit stride (then, with inner > 1, the outer schedule
    loads coalesced tiles along it). whole_tree: the `pairwise` mode -- every pass is a balanced tree
    over its part (each tile's lane tree, the binary counter over the tiles; parts of a power of two
    tiles, so the passes add up to one tree of depth ceil(log2 red)).
    element_size: bytes per input element (sets the tile; tile_elements overrides it, for tests).
    split_min_bytes: smallest input that may be split (default SPLIT_MIN_BYTES; tests lower it to cover
    the split on small inputs).
    heavy_state: the accumulator is compensated -- twice the registers and 7 flops per element; those
    kernels measured faster with half the tile and half the warps (bench/sweep_plan.py, H100; the fp64
    accumulator measured slower that way, so it keeps the default).
    accumulator_size: bytes of one accumulator element (8 for fp64): a tile's accumulators are held
    to acc_tile_bytes (default ACC_TILE_BYTES; pairwise: PAIRWISE_ACC_TILE_BYTES), so 16-bit inputs
    summed in fp64 get half the elements per tile.
    pipelined: passes of at least PIPELINE_MIN_TILES tiles per lane run software-pipelined loops
    (_loop_stages; the order of the additions does not change: results are the same bits).
    registers_first_stages: the most stages of a first outer pass in the registers layout (default
    LOOP_STAGES["outer"]).
    short_part_tiles: a split inner pass of fewer tiles per part than this takes fewer, longer parts
    of this many tiles per lane (default SHORT_PART_TILES: Welford and the stable exponential sum
    measured faster that way; SUM_SHORT_PART_TILES for the sums and the extrema); 0: never (the exact
    filter keeps its own measured split).
    plain_16bit_rows: a pipelined plan keeps plain loops for unsplit 16-bit rows of at least
    plain_rows_min_red elements (default PLAIN_16BIT_ROWS_MIN_RED; their loads keep the evict_first hint).
    min_tiles_per_lane: the tiles each lane of a first inner pass runs at least (default
    MIN_TILES_PER_LANE; the plain sums take PLAIN_MIN_TILES_PER_LANE).
    long_row_part: an inner first pass the planner would not split, over rows of at least twice this
    many elements, is split into parts of this many (each part's lanes narrowed to min_tiles_per_lane
    tiles, as a row that long would be); 0: never (CERTIFIED_EXP_16BIT_ROW_PART's note).
    wide_long_splits: a long split of a chained inner first pass runs fewer, wider programs
    (LONG_SPLIT_WARPS' note); interleave_long_splits: its parts interleaved too -- for the strategies
    measured so, whose kernels take interleaved parts (precred.launch.plan_for).
    long_row_warps: an unsplit inner first pass over long rows runs up to this many warps: the most, halving
    from it, for which its tile gives every thread 16-byte vectors, where more than the tile's (0: the
    tile's warps); long_row_stages: the most stages of such a pass (LONG_ROW_STAGES' note; None:
    LOOP_STAGES["inner"]).
    dependent_merge: two inner passes run as two launches, the second a programmatic dependent of the
    first (Plan.dependent_merge), instead of one with a fused merge -- for the strategies of
    PROGRAMMATIC_MERGE_STRATEGIES on a GPU with programmatic launches (precred.launch.plan_for).
    short_split_programs_per_sm: the programs per SM of a short split (default
    SHORT_SPLIT_PROGRAMS_PER_SM; VALUE_EXTREMA_SHORT_SPLIT's note).
    split_programs_per_sm: the programs per SM a split's first pass aims at (default PROGRAMS_PER_SM);
    state_pass_min_columns: the narrowest column block of a later outer pass (default
    STATE_PASS_MIN_COLUMNS); outer_min_warps: the narrowest kept axis, in warps, that takes the registers
    layout (default OUTER_MIN_WARPS) -- the three for the exact filter (EXACT_OUTER_16BIT_PROGRAMS_PER_SM's
    note). state_pass_wide_lanes: merging outer passes narrowed below WIDE_LAYOUT_COLUMNS widen their lanes to
    the block (_wide_lanes_state_pass; WIDE_LANES_STATE_STRATEGIES' note).
    """
    # Defaults read here, not bound in the signature: bench/ sweeps set precred.plan's constants.
    split_min_bytes = SPLIT_MIN_BYTES if split_min_bytes is None else split_min_bytes
    short_part_tiles = SHORT_PART_TILES if short_part_tiles is None else short_part_tiles
    plain_rows_min_red = PLAIN_16BIT_ROWS_MIN_RED if plain_rows_min_red is None else plain_rows_min_red
    if short_split_programs_per_sm is None:
        short_split_programs_per_sm = SHORT_SPLIT_PROGRAMS_PER_SM
    acc_tile_bytes = ACC_TILE_BYTES if acc_tile_bytes is None else acc_tile_bytes
    first_tile = tile_elements or min((TILE_BYTES // (2 if heavy_state else 1)) // element_size,
                                      (PAIRWISE_ACC_TILE_BYTES if whole_tree else acc_tile_bytes) // accumulator_size)
    # Later passes read partial states (fp32/fp64, one or two arrays): a fixed, smaller tile.
    state_tile = tile_elements or TILE_BYTES // 4
    if red < 1 or outer * inner < 1:
        raise ValueError("plan_reduction needs a non-empty reduction")
    vector = max(1, 16 // element_size)
    # The registers layout (schedules/outer.py): pairwise always (it runs the lane tree on every tile;
    # the wide layout measured 5-15x slower on 262144 x 256 over dim 0); chained passes, compensated
    # ones included, when the kept axis is at least OUTER_MIN_WARPS warps wide and the reduced one at
    # least OUTER_REGISTERS_MIN_RED long. Narrow kept axes and short reduced axes (16 x 262144 over
    # dim 0) measured faster in the wide layout (bench/sweep_outer.py, H100). Compensated passes were
    # kept wide until the pipelined loops; now the registers layout is faster on bf16 (kahan 8192^2
    # dim 0 1526 -> 2057 GB/s, 1024x65536 1820 -> 2102, 65536x1024 1670 -> 2009; fp32 8192^2 2406 -> 2517).
    min_warps = OUTER_MIN_WARPS if outer_min_warps is None else outer_min_warps
    registers_layout = whole_tree or (OUTER_CHAINS_IN_REGISTERS and inner >= 32 * vector * min_warps
                                      and red >= OUTER_REGISTERS_MIN_RED)

    def first_pass(parts_wanted, block_limit, short_part_tiles=0):
        if inner > 1 and inner_contiguous:
            return _outer_pass(outer, red, inner, parts_wanted, whole_tree, first_tile, block_limit,
                               vector if registers_layout else 0)
        return _inner_pass(outer, red, inner, parts_wanted, whole_tree, first_tile, block_limit, short_part_tiles,
                           min_tiles_per_lane)

    # First pass. Too few programs to fill the GPU: first give each program fewer outputs (down to one
    # row, or one warp's columns), then -- for inputs large enough to repay a second launch -- split
    # the reduced axis across programs.
    block_limit = 1 << 30
    single = first_pass(1, block_limit)
    floor = 1 if single.schedule == "inner" else 32 * vector * min_warps if registers_layout else WIDE_LAYOUT_COLUMNS
    while _programs(single) < FIRST_PASS_MIN_PROGRAMS_PER_SM * sm_count and single.block_kept > floor:
        block_limit = single.block_kept // 2
        single = first_pass(1, block_limit)
    parts_wanted = 1
    input_bytes = outer * red * inner * element_size
    if (_programs(single) < 2 * sm_count and red > 4 * single.lanes
            and input_bytes >= split_min_bytes):
        target = (split_programs_per_sm or PROGRAMS_PER_SM) * sm_count
        parts_wanted = target // _programs(single) if SPLIT_PARTS_WITHIN_TARGET else -(-target // _programs(single))
        parts_wanted = min(parts_wanted, -(-red // single.lanes))
    long_rows = (long_row_part > 0 and parts_wanted == 1 and single.schedule == "inner"
                 and red >= 2 * long_row_part and input_bytes >= split_min_bytes)
    if long_rows:
        parts_wanted = red // long_row_part
    short = (short_part_tiles > 0 and parts_wanted > 1 and single.schedule == "inner" and not long_rows
             and -(-red // parts_wanted) < short_part_tiles * single.lanes)
    if short:
        parts_wanted = max(2, short_split_programs_per_sm * sm_count // _programs(single))
    # A long split (not the short parts, decided at PROGRAMS_PER_SM as without it) runs fewer, wider
    # programs where LONG_SPLIT_WARPS warps still load 16-byte vectors and its parts keep
    # LONG_SPLIT_MIN_TILES tiles per lane.
    wide = (wide_long_splits and LONG_SPLIT_WARPS > 0 and single.schedule == "inner" and not whole_tree
            and parts_wanted > 1 and not short and not long_rows
            and _vector_loads(single.lanes, element_size, LONG_SPLIT_WARPS))
    if wide:
        wide_parts = max(2, min(LONG_SPLIT_PROGRAMS_PER_SM * sm_count // _programs(single), -(-red // single.lanes)))
        wide = -(-red // wide_parts) >= LONG_SPLIT_MIN_TILES * single.lanes
        parts_wanted = wide_parts if wide else parts_wanted
    part_tiles = 0   # the tiles per lane each part's lanes are narrowed to (0: the whole row's lanes)
    if short:
        part_tiles = short_part_tiles
    elif long_rows:   # each part planned as a row that long would be
        part_tiles = min_tiles_per_lane or MIN_TILES_PER_LANE
    passes = [first_pass(parts_wanted, block_limit, part_tiles)]
    if heavy_state and not short:
        passes[0] = replace(passes[0], num_warps=max(1, passes[0].num_warps // 2))
    if wide:
        passes[0] = replace(passes[0], num_warps=LONG_SPLIT_WARPS,
                            interleaved=INTERLEAVE_PARTS and interleave_long_splits)
    long_row = (passes[0].schedule == "inner" and not whole_tree and passes[0].parts == 1
                and passes[0].block_kept == 1 and red >= LONG_SPLIT_MIN_TILES * passes[0].lanes)
    if long_row and long_row_warps:
        # the most warps, up to long_row_warps, whose threads all still load 16-byte vectors of the tile
        warps = long_row_warps
        while warps > passes[0].num_warps and not _vector_loads(passes[0].lanes, element_size, warps):
            warps //= 2
        if warps > passes[0].num_warps:
            passes[0] = replace(passes[0], num_warps=warps)
    if passes[0].schedule == "outer" and not registers_layout:
        passes[0] = replace(passes[0], num_warps=min(passes[0].num_warps, OUTER_WIDE_MAX_WARPS))

    # Later passes merge the partial states. Inner passes leave them as [rows, parts] (contiguous
    # along parts: an inner pass again); outer passes as [parts, outer*inner] (an outer pass again).
    while passes[-1].parts > 1:
        prev = passes[-1]
        if prev.schedule == "inner":
            nxt = _inner_pass(prev.outer * prev.inner, prev.parts, 1, 1, whole_tree, state_tile, 1 << 30)
        else:
            nxt = _outer_pass(1, prev.parts, prev.outer * prev.inner, 1, whole_tree, state_tile, 1 << 30, 0)
            min_columns = STATE_PASS_MIN_COLUMNS if state_pass_min_columns is None else state_pass_min_columns
            while _programs(nxt) < 2 * sm_count and nxt.block_kept > min_columns > 0:
                # Same lanes and parts, fewer columns: the same operations in the same order, the same
                # bits (tests/test_gpu_only.py; Welford's FMAs are explicit for that, strategies/welford.py)
                # -- unless state_pass_wide_lanes, below.
                nxt = _outer_pass(1, prev.parts, prev.outer * prev.inner, 1, whole_tree, state_tile,
                                  nxt.block_kept // 2, 0)
            if state_pass_wide_lanes and not whole_tree and nxt.block_kept < WIDE_LAYOUT_COLUMNS:
                nxt = _wide_lanes_state_pass(prev.parts, prev.outer * prev.inner, nxt.block_kept)
        if nxt.parts > 1 and nxt.parts >= prev.parts:
            raise AssertionError(f"plan_reduction made no progress: {prev} -> {nxt}")
        passes.append(nxt)
    if pipelined:
        first_stages = registers_first_stages if passes[0].schedule == "outer" and registers_layout else None
        if long_row and long_row_stages:
            first_stages = long_row_stages
        passes = [replace(p, loop_stages=_loop_stages(p, i == 0, element_size, accumulator_size, plain_16bit_rows,
                                                      plain_rows_min_red, first_stages if i == 0 else None))
                  for i, p in enumerate(passes)]
    two_inner = len(passes) == 2 and all(p.schedule == "inner" for p in passes)
    dependent = dependent_merge and two_inner
    return Plan(tuple(passes), fused_merge=FUSE_INNER_MERGE and two_inner and not dependent,
                dependent_merge=dependent)


# The extrema's atomic schedule (schedules/atomic.py) replaces the split's merging pass with int64
# atomics: for fp32/bf16/fp16 rows of at most 2^32 elements whose plan splits an inner pass.
# ATOMIC_EXTREMA says whether the planner takes it there (bench/extrema_suite.py measures both). Off:
# on the H100 it was no faster than the split on 2^28 elements (amax / argmax fp32 2214 / 2214 vs
# 2211 / 2209 GB/s, bf16 2411 / 2417 vs 2405 / 2405) and slower on 16 x 262144 over dim=-1 in three
# of four cases (276 / 143 / 178 / 57 vs 235 / 476 / 330 / 106): the key fill and the gather are
# launches too. Those early figures, and the suite's until 2026-11-28 (0.11-0.25x torch on 16 x 262144),
# timed the atomic path through Triton's JIT launcher; with launch recipes and keys reset by the finish
# kernel (no fill), H100, bench/extrema_suite.py, GB/s planned -> atomic (amax's planned kernel keeps
# the value alone, its atomic one the index too): 16x262144 amax fp32 1216 -> 672, bf16 745 -> 471;
# argmax fp32 1051 -> 672, bf16 707 -> 466; 2^28 amax fp32 3006 -> 2764, bf16 2813 -> 2516, argmax
# fp32 2976 -> 2757, bf16 2792 -> 2508: still off.
ATOMIC_EXTREMA = False
ATOMIC_MAX_RED = 2 ** 32


def use_atomic(plan: Plan, dtype, red: int) -> bool:
    """Whether an extremum planned as `plan` runs on the atomic schedule (dtype: a torch dtype)."""
    first = plan.passes[0]
    return (ATOMIC_EXTREMA and len(plan.passes) > 1 and first.schedule == "inner"
            and dtype.itemsize <= 4 and red <= ATOMIC_MAX_RED)


# ptxas's register cap (maxnreg) for the first pass of a split extremum with its index on 8 warps: 64
# registers fit 4 programs per SM, the PROGRAMS_PER_SM the split's parts were counted for. Without it the
# fp32 pass took 80 registers (3 programs per SM: 525 programs ran as 1.33 waves of 396) and argmax fp32
# 2^28 read 2613-2668 GB/s on the H100 (2922 at 89 registers: 2 per SM, 1.99 waves); capped 2858/2861.
EXTREMUM_SPLIT_MAX_REGISTERS = 64
# ...and for amax / amin's first pass over 16-bit rows of one part on 8 warps whose programs fit one
# wave of 8 per SM: 32 registers fit 8 per SM. bench/sweep_outer.py --op amax
# --dim -1, H100, GB/s, two runs: bf16 1024 x 65536 (1024 programs: 40 registers ran them as 1.29 waves
# of 6 per SM) 1755/1756 -> 2004/2002 (torch 2034); the cap on every such pass cost fp32 rows 4% (2603
# -> 2501 on 1024 x 65536) and bf16 8192^2 / 65536 x 1024 (2048 programs each) 2% / 4%, hence the conditions.
VALUE_EXTREMUM_MAX_REGISTERS = 32


def extremum_register_cap(p: Pass, with_index: bool, element_size: int, sm_count: int) -> int | None:
    """maxnreg for an extremum's first pass p (EXTREMUM_SPLIT_MAX_REGISTERS with its index,
    VALUE_EXTREMUM_MAX_REGISTERS for the value alone), or None: ptxas's own choice."""
    if p.schedule != "inner" or p.num_warps != 8:
        return None
    if with_index:
        return EXTREMUM_SPLIT_MAX_REGISTERS if p.parts > 1 else None
    if element_size == 2 and p.parts == 1 and _programs(p) <= 8 * sm_count:
        return VALUE_EXTREMUM_MAX_REGISTERS
    return None


@dataclass(frozen=True)
class RowPlan:
    """softmax's single-read kernel (schedules/single_read.py): whole rows per program."""
    j_fast: bool       # the reduced dim is the tile's fast axis (it is the contiguous one)
    block_rows: int    # rows per program
    block_j: int       # the row, padded to a power of two
    num_warps: int

    @property
    def depth(self) -> int:
        """Roundings of the row's sum: the fixed tree over BLOCK_J lanes."""
        return self.block_j.bit_length() - 1


# Longest row the single-read kernel keeps on chip, by the accumulator's bytes (the row and its
# exponentials sit in registers), along the contiguous dim and along a strided one (whose tile also
# spans at least SINGLE_READ_MIN_COLUMNS rows for coalesced loads); longer rows take the row loop or
# the reduction + normalizing pass. bench/sweep_softmax.py, H100, GB/s: fp32 accumulator, contiguous
# rows of 32768: single-read 2558 vs row loop 1959 (fp32), 2050 vs 1773 (bf16); 65536: 1760 vs 1915
# (fp32), 1683 vs 1811 (bf16), log_softmax bf16 700 vs 1880. fp64 accumulator: 8192: 2447 vs two-pass
# 1346; 16384: 1720 vs row loop 1523 but 32768: 413 vs 1489 (spilled registers). Strided (dim=0),
# fast: 256: 1732 vs 424, 1024: 969 vs 1335; fp64: 64: 528 vs 242, 256: 501 vs 822.
SINGLE_READ_MAX_ROW = {4: 32768, 8: 8192}
SINGLE_READ_MAX_STRIDED_ROW = {4: 256, 8: 64}
SINGLE_READ_MIN_COLUMNS = 32
# Elements of a program's tile (several short rows share one), and per thread, which sets the warps
# (at most 32): 32 for an fp32 accumulator (but SINGLE_READ_FP32_ROW_PLANS' rows) and for strided rows,
# 16 for contiguous rows in fp64 (twice the registers per element). Same sweep: 8192 rows, fp64: 16 warps 2447, 8 warps 1700 GB/s; bf16
# fast: 8 warps 2746, 16 warps 2524; strided: 32 per thread best everywhere.
SINGLE_READ_TILE = 4096
SINGLE_READ_FP64_ROW_PER_THREAD = 16
# Where the fp64 accumulator's kernel also runs log_softmax's counted split tail (`accurate` over fp32
# rows: precred.modes.split_tail_counts_maxima): (tile elements, elements a thread) by the padded row
# length, where measured better than SINGLE_READ_FP64_ROW_TILE's 512 at SINGLE_READ_FP64_ROW_PER_THREAD.
# H100, 2026-12-06, bench/sweep_outer.py --op log_softmax --modes accurate --dim -1, GB/s of the input,
# two runs each. 8 a thread on rows of 4096 / 8192 -- twice the warps, no spill (sm_90, rows of 8192:
# 62 registers against 64 + 276 bytes spilled; 632 instructions against 1200): 8192^2 612 / 610 -> 803 /
# 806 (4 a thread: 807), 4096^2 586 / 586 -> 1008 / 1008 (4: 509); rows of 1024 / 256 lose at 8 (65536x1024
# 1357 -> 1333, 262144x256 1374 -> 1265), and the fp64 mode (no split tail) on both rows (8192^2 1255 ->
# 855, 4096^2 1139 -> 1048). Rows of 256 alone in a program (tiles of 256, one warp): 262144x256 1370 /
# 1370 -> 1418 / 1416, where the fp64 mode loses (1476 / 1471 -> 1438 / 1442); rows of 512 even (1364 ->
# 1358 / 1362), of 1024 on tiles of 1024 even (1349 -> 1357), 32 a thread on them 932.
# fp64 input (its split tail counts too) takes the same plans, not timed (sm_90, rows of 8192 at 8 a
# thread: 64 registers, no spill).
SINGLE_READ_FP64_SPLIT_TAIL_ROW_PLANS = {256: (256, 16), 4096: (512, 8), 8192: (512, 8)}
# The fp64 accumulator's contiguous rows take tiles of SINGLE_READ_FP64_ROW_TILE elements (one row of
# 8192 per program whatever the tile). H100, 2026-11-27, bench/sweep_outer.py --dim -1 --modes fp64,
# GB/s of the input, two runs, tile 4096 -> 2048: softmax fp32 65536x1024 1416/1418 -> 1470/1470,
# 262144x256 1428/1427 -> 1455/1448, bf16 929/926 -> 994/987, 1059/1059 -> 1065/1059; log_softmax fp32
# 1211/1215 -> 1233/1232, bf16 804/804 -> 852/851, the rest within 1%. Tiles of 8192: up to 17% slower;
# 8 or 32 elements per thread instead of 16: up to 42% / 78% slower. Then 2048 -> 1024 -> 512 (two rows
# of 256 on one warp, a row of 1024 on two): log_softmax fp32
# 65536x1024 1256/1253 -> 1471/1471 -> 1474/1474, 262144x256 1122/1125 -> 1383/1373 -> 1469/1471, bf16
# 845/850 -> 985/977 -> 989/979, 799/803 -> 913/909 -> 930/926; softmax bf16 1000/993 -> 1071/1058 ->
# 1075/1063, 1065/1064 -> 1068/1062 -> 1091/1088, fp32 within 0.5%.
SINGLE_READ_FP64_ROW_TILE = 512
# The fp32 accumulator's contiguous rows, by their padded length: (tile elements, elements a thread)
# where measured better than SINGLE_READ_TILE's 4096 at 32 a thread. H200, 2026-11-28, _fast_ softmax /
# log_softmax, GB/s (input + output), two runs each. Rows of 512 .. 8192, 64 a thread on tiles of 2048
# (rows up to 2048 on one warp a program): fp32 rows of 512 3968/3987 -> 4051/4076, log 3968/3988 ->
# 4071/4071; 1024 3987/3967 -> 4046/4068, log 3972/3974 -> 4065/4065; 2048 +0.5%; 4096 3913/3932 ->
# 4000/4000, log -0.1%; 8192 3991/3970 -> 3948/3968, log 3989/3968 -> 3998/4021; bf16 512 3737/3735 ->
# 3876/3891, log 3404/3402 -> 3574/3573; 1024 3708/3691 -> 3878/3855, log 3388/3385 -> 3811/3813; 2048
# +1.5% / +1.8%; 4096 within 0.5%; 8192 3593/3585 -> 3705/3708, log 3475/3503 -> 3627/3649. Rows of 256,
# tiles of 1024 (one warp, four rows): fp32 4008/3988 -> 4099/4099, log 4041/4043 -> 4091/4090; bf16
# 3871/3848 -> 3878/3907, log 3353/3468 -> 3568/3576 (64 a thread on 2048 lost bf16 18%; 8 or 16 a
# thread on 1024 gained fp32 1-4% and lost bf16 log 1-5%). Kept at the default: rows of 16384 (64 a
# thread: log_softmax fp32 3939/3941 -> 2689/2697) and 32768 (bf16 softmax -1.3%); shorter rows
# unmeasured. Since softmax's fp32 outputs take the two-part exponential (modes.softmax_two_part_exp),
# rows of 1024 run 16 a thread on tiles of 1024: H200, 2026-11-29, bench/sweep_outer.py --op softmax /
# log_softmax --dim -1 --modes fast, GB/s of the input, three runs, 65536x1024 (2048, 64) -> (1024, 16):
# softmax fp32 2033/2035/2023 -> 2051/2062/2050, bf16 1959/1956/1945 -> 1984/1986/1974; log_softmax fp32
# 2027/2039/2028 -> 2051 x3, bf16 1924/1925/1935 -> 1960/1971/1959. Rows of 256 at (1024, 16): softmax
# fp32 +1.5%, but bf16 -0.6% and log_softmax bf16 1780/1780/1791 -> 1733/1724/1734: kept. logsumexp's
# fp32 rows of 1024 share the plan (plan_logsumexp_rows): --op logsumexp, 3678/3699/3700 -> 3725/3722/3745.
SINGLE_READ_FP32_ROW_PLANS = {256: (1024, 32), 512: (2048, 64), 1024: (1024, 16), 2048: (2048, 64),
                              4096: (2048, 64), 8192: (2048, 64)}
SINGLE_READ_MAX_WARPS = 32
# Strided rows (the reduced dim is not the contiguous one) take tiles of SINGLE_READ_STRIDED_TILE_BYTES
# of input on SINGLE_READ_STRIDED_WARPS warps, by the accumulator's bytes: with fp32 state 64 (fp32) or
# 128 (16-bit) elements per thread, each thread holding whole rows (the reduced dim) of its columns.
# .probe/softmax_d0.py, H100, softmax 16x262144 dim 0 (rows of 16), GB/s, 256-row tiles on 4 warps ->
# this: fp32 fast 1229 -> 2110 (512 rows), fp64 742 -> 1217; bf16 fast 234 -> 1464 (1024 rows), fp64
# 130 -> 684; bf16 on 8 warps: 398 (1024 rows), 1348 (2048). Measured on rows of 16 only, hence
# SINGLE_READ_STRIDED_MAX_J: longer strided rows keep the 4096-element tiles.
# fp64 state: 2 KiB tiles on one warp -- a 128-byte line per row of the tile, 32 (16-bit) or 16 (fp32)
# fp64 values per thread, still whole rows in the thread: no spills (bench/kernel_resources.py,
# log_softmax/fp64 16x262144 over dim 0: bf16 216 registers against 255 and 2544 spilled bytes; fp32
# 80 against 255 and 208). bench/sweep_outer.py --dim 0 --shapes 16x262144 --modes fp64, H100, GB/s of
# the input, two runs, 32 KiB on 4 warps -> 2 KiB on 1: softmax fp32 611/612 -> 859/861, bf16 339/349
# -> 458/459; log_softmax fp32 647/672 -> 813/784, bf16 121/122 -> 333/333 (torch 590 / 308, 744 /
# 453). 4 KiB on 1 warp: within 5% of that but log_softmax bf16 368/144; 8 KiB on 2 warps (spills):
# 105-377; 1 KiB: within 6%. (Earlier, tiles of 4096 elements on 4 warps -- the rows across warps,
# merged through shared memory -- fell to 130 GB/s on bf16.)
SINGLE_READ_STRIDED_TILE_BYTES = {4: 32768, 8: 2048}
SINGLE_READ_STRIDED_WARPS = {4: 4, 8: 1}
SINGLE_READ_STRIDED_MAX_J = 16
# ptxas's register cap (maxnreg) of the single-read kernel on contiguous rows, by the accumulator's
# bytes (None: ptxas's own choice), never more than lets one program launch; plans of fewer than
# SINGLE_READ_CAP_MIN_WARPS warps (the strided fp64 plans' one warp, 216 registers) take none. With the
# fp64 accumulator, log_softmax keeps x (fp64) beside its exponentials through the row's sum: 77-79
# registers, one 16-warp program per SM (8192-element rows) or three of 8 warps; at 64 (128-136 bytes
# spilled) two or four. H100, 2026-11-27, bench/sweep_outer.py --dim -1 --modes fp64, GB/s of the
# input, two runs each, no cap -> 64: log_softmax fp32 8192^2 729 -> 1117, 65536x1024 1052 -> 1102,
# 262144x256 935 -> 1085; bf16 8192^2 451 -> 678, 65536x1024 706 -> 712, 262144x256 805/810 -> 772/772
# (the one loss); softmax (64 registers or fewer already) within 0.5% but fp32 262144x256 1220 -> 1315.
# (Measured with 4096-element tiles; under SINGLE_READ_FP64_ROW_TILE's 512, only rows of at least 2048
# elements make programs of 4 warps or more.)
# Measured and dropped: caps of 48 / 40 (spills of 52-396 bytes: every case but softmax bf16 8192^2
# slower, by up to 60%); log_softmax converting the raw tile anew for its output instead of keeping the
# widened one (norm_rows.opaque_copy: 64 registers, no spill, but one more fp32 -> fp64 conversion per
# element): 1036-1075 / 664-778 against 1073-1119 / 678-764 with the cap; a cap for softmax's row loop
# (rows of 65536: 48 / 40 / 32 registers, 5 / 6 / 8 programs per SM against 4-5): fast within 1.5%,
# fp64 fp32 880 -> 877 / 813 / 548, bf16 555 -> 554 / 544 / 484.
# The fp64 accumulator's single-read kernel is bound by the fp64 pipe (sm_90 SASS of softmax fp64 bf16
# 8192^2, per element: ~15 DFMA, 5 DADD, 2 DMUL, 2.5 DSETP, 2 fp64 conversions at a quarter rate),
# hence its maximum in fp32 (schedules/single_read.py): same sweep, two runs, before -> after: softmax
# fp32 8192^2 1227 -> 1269, 65536x1024 1221 -> 1412, 262144x256 1310 -> 1425, bf16 737 -> 780, 816 ->
# 927, 924 -> 1063; log_softmax fp32 1127 -> 1176, 1109 -> 1215, 1078 -> 1099, bf16 682 -> 729, 716 ->
# 800, 765 -> 790. Measured and dropped, the same way: a branch-free fp64 exp of the gap (Cody-Waite,
# degree-11 fit, 2^n in the exponent bits, specials decided on the fp32 gap; within 1.54u of mpmath on
# 25000 gaps under the interpreter) instead of libdevice's: softmax 2-8% slower (64 registers against
# 56 on bf16 8192^2), log_softmax fp32 +3% / +5% / +19%, bf16 0 / -3% / +9%; with its specials
# compared in fp64 (two DSETP) instead: within 1% for softmax.
SINGLE_READ_MAX_REGISTERS = {4: None, 8: 64}
SINGLE_READ_CAP_MIN_WARPS = 4


@lru_cache(maxsize=4096)
def plan_single_read(rows: int, red: int, *, j_fast: bool, accumulator_size: int, element_size: int = 4,
                     tile_elements: int | None = None, per_thread: int | None = None,
                     max_row: int | None = None, counted_split_tail: bool = False) -> RowPlan | None:
    """The single-read plan of a softmax over rows x red (both >= 1) of element_size-byte inputs, or
    None where rows do not fit on chip. counted_split_tail: the kernel also runs log_softmax's split
    tail with the maxima counted (COUNT_MAXIMA). tile_elements, per_thread, max_row override the
    defaults (bench/sweep_softmax.py)."""
    if rows < 1 or red < 1:
        raise ValueError("plan_single_read needs a non-empty softmax")
    block_j = _pow2_at_least(red)
    if max_row is None:
        max_row = (SINGLE_READ_MAX_ROW if j_fast else SINGLE_READ_MAX_STRIDED_ROW)[accumulator_size]
    if block_j > max_row:
        return None
    strided = not j_fast and block_j <= SINGLE_READ_STRIDED_MAX_J and tile_elements is None and per_thread is None
    if j_fast and tile_elements is None and per_thread is None:
        if accumulator_size == 4:
            tile_elements, per_thread = SINGLE_READ_FP32_ROW_PLANS.get(block_j, (None, None))
        elif counted_split_tail:
            tile_elements, per_thread = SINGLE_READ_FP64_SPLIT_TAIL_ROW_PLANS.get(block_j, (None, None))
    if tile_elements is None:
        tile_elements = (SINGLE_READ_STRIDED_TILE_BYTES[accumulator_size] // element_size if strided
                         else SINGLE_READ_FP64_ROW_TILE if j_fast and accumulator_size == 8
                         else SINGLE_READ_TILE)
    if per_thread is None:
        per_thread = SINGLE_READ_FP64_ROW_PER_THREAD if j_fast and accumulator_size == 8 else 32
    floor = 1 if j_fast else min(SINGLE_READ_MIN_COLUMNS, _pow2_at_least(rows))
    block_rows = max(floor, min(_pow2_at_least(rows), tile_elements // block_j))
    warps = max(1, min(SINGLE_READ_MAX_WARPS, block_rows * block_j // (32 * per_thread)))
    if strided:
        warps = min(warps, SINGLE_READ_STRIDED_WARPS[accumulator_size])
    return RowPlan(j_fast, block_rows, block_j, _pow2_at_most(warps))


# Persistent single-read grids (schedules/single_read.py, ROW_BLOCK_STAGES), by (accumulator size, padded
# row length, split tail -- log_softmax's `accurate` pass, precred.modes.log_softmax_split_tail) of
# contiguous rows: (programs a SM, stages of the loop over row blocks). Where a row's one program fills
# most of the SM (log_softmax's `accurate` mode, rows of 4096 / 8192), a program per block runs its load,
# reductions and store one after the other; a program looping over blocks loads the next ones (cp.async)
# during the reductions. H100, 2026-12-06, bench/sweep_outer.py --op log_softmax|softmax --dim -1 --shapes
# 8192x8192,4096x4096,65536x1024,262144x256, every key at once at (programs a SM, stages) (1, 3) / (2, 3)
# / (4, 3) / (8, 3) / (2, 2), GB/s of the input (default first; torch 1006 / 1101 fp32, 593 / 654 bf16):
# accurate log_softmax fp32 8192^2 805 -> 1088 / 1078 / 1063 / 1032 / 754 (0.80 -> 1.08x torch; (1, 3) and
# (1, 4) 1083-1086 in two more runs), 4096^2 1009 -> 870 / 1072 / 1065 / 1037 / 877 (1056-1071 at (2, 3)
# in two more); bf16 (the fp32 accumulator) 8192^2 1154 -> 1211 / 1353 / 1343 / 1339 / 1148, 4096^2 1042
# -> 686 / 999 / 1093 / 1120 / 694. Every other case lost at every setting: the fp64 and fast modes of
# softmax and log_softmax on these shapes (fp32 softmax fp64 8192^2 1460 -> 1357-1407, rows of 1024 / 256
# to 0.17-0.93x of their default), and accurate on rows of 1024 / 256 (65536x1024 fp32 1356 -> 367-1339):
# no entry for them. (The split tail is in the key, not only the accumulator: bf16 accurate's fp32
# accumulator is fast's.) fp64 input with the split tail takes the fp32 rows' entries, fp16 bf16's: not
# timed. This table against it emptied (01202e7, same sweep, log_softmax accurate / fp64 / fast): fp32
# 8192^2 804 -> 1080, 4096^2 1012 -> 1062, bf16 1150 -> 1349, 1017 -> 1118; fp64 and fast within 1.5%.
SINGLE_READ_PERSISTENT = {(8, 8192, True): (1, 3), (8, 4096, True): (2, 3),
                          (4, 8192, True): (2, 3), (4, 4096, True): (8, 3)}


def single_read_persistence(p: RowPlan, accumulator_size: int, split_tail: bool, rows: int,
                            sm_count: int) -> tuple[int, int] | None:
    """(programs, stages) of a persistent single-read launch of plan p over `rows` rows
    (SINGLE_READ_PERSISTENT), or None: a program per block of rows (also where there are no more blocks
    than programs)."""
    entry = SINGLE_READ_PERSISTENT.get((accumulator_size, p.block_j, split_tail)) if p.j_fast else None
    if entry is None:
        return None
    per_sm, stages = entry
    programs = per_sm * sm_count
    if -(-rows // p.block_rows) <= programs:
        return None
    return programs, stages


def single_read_register_cap(p: RowPlan, accumulator_size: int) -> int | None:
    """The single-read kernel's maxnreg under plan p (SINGLE_READ_MAX_REGISTERS), or None: no cap."""
    cap = SINGLE_READ_MAX_REGISTERS.get(accumulator_size)
    if cap is None or not p.j_fast or p.num_warps < SINGLE_READ_CAP_MIN_WARPS:
        return None
    return min(cap, REGISTER_FILE // (32 * p.num_warps))


# logsumexp in the fp64 accumulator over contiguous fp32 rows of at most LOGSUMEXP_SINGLE_READ_MAX_ROW
# elements takes softmax's single-read plan (schedules/single_read.py single_read_logsumexp_kernel: the
# row's maximum first, then one fp64 exp per element, where the one-pass states add a rescaling exp per
# lane and vector). H100, 2026-11-27, bench/sweep_outer.py --op logsumexp --dim -1 --modes fp64, GB/s,
# two runs, one-pass -> single-read with tiles of 512 / 2048 / 4096 elements: 65536x1024 1550/1555 ->
# 2039/2042 / 1789/1791 / 1444/1432, 262144x256 1637/1648 -> 1946/1951 / 1525/1508 / 1517/1499,
# 8192^2 1516/1511 -> 1487/1487 (hence rows of 8192 keep the one pass; rows between were not measured).
# The fp32 accumulator (`fast`) over fp32 rows of up to 8192 too: H200, 2026-11-29, sweep_outer --op
# logsumexp --dim -1 --modes fast, GB/s one pass -> single read: 8192^2 3548 -> 3638, 65536x1024 3522 ->
# 3674, 262144x256 3471 -> 3627 (copy 4254). Not bf16 `fast`: 8192^2 2996 -> 2851, 65536x1024 even,
# 262144x256 2586 -> 2147. (bf16's fp64 mode is the certified fp32 pass, modes.CERTIFIED_EXP_MODE,
# which keeps the one pass and its recompute: launch.reduce_logsumexp.)
# By (accumulator size, input element size): the longest row the single-read kernel takes.
LOGSUMEXP_SINGLE_READ_MAX_ROW = {(8, 4): 1024, (4, 4): 8192}


# logsumexp's `accurate` mode over contiguous fp32 rows (schedules/accurate_rows.py): rows of at most
# ACCURATE_ONE_TILE_MAX_ROW elements are held whole, several a program up to ACCURATE_ONE_TILE_ELEMENTS
# elements, ACCURATE_PER_THREAD a thread (each thread computes the bound and the fp64 log of every row
# it holds a part of: few threads a row keep that per-row work small against the row's elements);
# longer rows stream in tiles of ACCURATE_STREAM_TILE on ACCURATE_STREAM_WARPS warps,
# ACCURATE_STREAM_STAGES stages, one row a program -- or, with fewer than ACCURATE_MIN_ROWS_PER_SM rows
# per SM, split into parts of at least ACCURATE_MIN_PART_TILES tiles (as many parts as give
# ACCURATE_MIN_ROWS_PER_SM programs per SM, at most ACCURATE_MAX_PARTS), merged by the last to arrive.
# H200, 2026-12-02, bench/sweep_outer.py --op logsumexp --dim -1 --modes fp64,accurate, fp32, GB/s
# (fp64 mode 1724 / 1518 / 2239 / 2035 on 1024x65536 / 8192^2 / 65536x1024 / 262144x256; torch 558 /
# 530 / 536 / 512): 16 a thread 2930 / 2751 / 2874 / 1648, 32 a thread 2925 / 3307 / 3134 / 1644;
# streamed tiles of 8192 2980 (4096: 2930), 4 warps 2689.
# Not taken (H200, 2026-12-02, same sweep, --modes accurate): more rows a program, 2048 / 4096 elements:
# 65536x1024 3113 -> 2909 / 2294, 262144x256 2323 -> 1625 / 1568 GB/s (not profiled).
ACCURATE_ONE_TILE_MAX_ROW = 8192
# Held rows finish the rows their bound does not keep in fp64 in the same program (reading the row
# again, from L2), ACCURATE_FINISH_PER_THREAD fp64 terms a thread a tile: no recompute launch for them.
# sm_90 (bench/kernel_resources.py): the kernel's registers unchanged (64 on 8192^2, 65536x1024 and
# 4096^2, 80 on 262144x256). H200, 2026-12-04, bench/probe_accurate_columns.py --dim 1, GB/s, the
# recompute launch -> the finish in place, 8192^2 / 65536x1024 / 262144x256 / 4096^2: randn 3392 /
# 3132 / 3209 / 2351 -> 3449 / 3649 / 3314 / 2433 (the launch it spares: 65536x1024 5.8x -> 6.8x
# torch), every 997th row left 3193 / 3045 / 3136 / 1992 -> 3330 / 3550 / 3128 / 2255, every row left
# (log-probabilities) 1001 / 1023 / 720 / 820 -> 1500 / 1631 / 1411 / 1325 (the fp64 mode 1271-2249).
ACCURATE_FINISH_PER_THREAD = 8
ACCURATE_ONE_TILE_ELEMENTS = 512
ACCURATE_PER_THREAD = 32
# Held rows of at most ACCURATE_PIECES_MAX_ROW elements (and two pieces at least) are taken in pieces of
# ACCURATE_PIECE elements, one warp a program: a piece's 16-byte vectors across ACCURATE_PIECE / 4
# threads, the rows across the warp's other threads, so that each thread holds one row and finishes it
# alone (schedules/accurate_rows.py PIECES): on rows of 256, 2 a one-warp program, every thread had
# computed the fp64 log and the bound of both rows -- ~290 of the kernel's 672 sm_90 instructions a
# thread, for 16 elements; in pieces of 32, 4 rows a program, 864 a thread for its 32 elements and one
# row's finish (216 a row against 336). H200, 2026-12-02, bench/probe_accurate_columns.py --dim -1,
# public GB/s, two runs: 262144x256 2449/2444 (held whole) -> 3216/3208 (pieces of 32; of 64, 2 rows a
# program: 2787/2795; of 16, 8 rows: 3087/3078); 65536x1024 (held whole either way) unchanged.
ACCURATE_PIECES_MAX_ROW = 256
ACCURATE_PIECE = 32
# Split (H200, same sweep, fp32): 16 x 262144 in 16 parts of 4 tiles 1004 GB/s, 3.54x torch (the fp64
# mode's split, the route before: 803, 2.83x). Remeasured after the six-instruction exponential (H200,
# 2026-12-02, bench/probe_accurate_columns.py --shapes 16x262144 --dim -1, public GB/s, one run each):
# this 1036; 4 rows per SM in parts of 2 tiles 983, 8 per SM in parts of 1 tile 945; streamed tiles of
# 2048 on 4 warps 1053, with 4 rows per SM 1066 -- within the runs' spread (1036-1066), not taken.
ACCURATE_MIN_ROWS_PER_SM = 2
ACCURATE_MIN_PART_TILES = 4
ACCURATE_MAX_PARTS = 1024
# The recompute a programmatic dependent (plan.RECOMPUTE_PROGRAMMATIC_LAUNCH) only for rows of at least
# this many elements: its programs, resident early, crowded the short rows' many short programs (same
# sweep, without -> with: 262144x256 2347 -> 1648; 1024x65536 2867 -> 2930, 8192^2 2709 -> 2751,
# 65536x1024 2805 -> 2874).
ACCURATE_RECOMPUTE_PDL_MIN_ROW = 1024
ACCURATE_STREAM_TILE = 4096
ACCURATE_STREAM_WARPS = 8
ACCURATE_STREAM_STAGES = 3


@dataclass(frozen=True)
class AccurateExpPlan:
    block_rows: int    # rows a program (1 when streamed)
    block_n: int       # a tile's elements along the row, a power of two
    num_warps: int
    one_tile: bool     # whole rows held at once (else streamed in tiles of block_n)
    loop_stages: int
    red: int           # the row length
    parts: int = 1     # programs a streamed row is split across
    chunk: int = 0     # elements a part (whole tiles; parts > 1)
    pieces: int = 1    # pieces a held row's tile is taken in (ACCURATE_PIECE elements each; 1: whole)

    @property
    def tiles(self) -> int:
        """Tiles a row takes (1 when held whole)."""
        return 1 if self.one_tile else -(-self.red // self.block_n)

    @property
    def finish_lanes(self) -> int:
        """Held rows (one_tile): the lanes of the tiles in which a program finishes the rows its bound did
        not keep in fp64 itself (schedules/accurate_rows.py _finish_in_fp64): ACCURATE_FINISH_PER_THREAD
        fp64 terms a thread at a time, whole rows' tiles at most. 0 when streamed."""
        if not self.one_tile:
            return 0
        per_tile = ACCURATE_FINISH_PER_THREAD * 32 * self.num_warps // self.block_rows
        return max(1, min(self.block_n, _pow2_at_most(per_tile)))

    @property
    def finish_depth(self) -> int:
        """The fp64 additions on a term's path in that finish: one a tile after the first along its
        lane, then the fixed tree over the lanes."""
        lanes = self.finish_lanes
        return self.block_n // lanes - 1 + lanes.bit_length() - 1 if lanes else 0

    @property
    def fp64_depth(self) -> int:
        """At most as many fp64 roundings on an element's path (schedules/accurate_rows.py): the tree of a
        held row; streamed, a thread's tile sum (its block_n / threads elements), a rescaling product and
        an addition per later tile, the merge's product and the sum over the threads (a tree)."""
        if self.one_tile and self.pieces > 1:   # any order of a piece's sum, then of the pieces'
            return self.block_n // self.pieces + self.pieces
        if self.one_tile:
            return self.block_n.bit_length() + 1
        threads = 32 * self.num_warps
        merge = self.parts + 3 if self.parts > 1 else 0   # the parts' product and sum
        return self.block_n // threads + 2 * self.tiles + 2 + threads.bit_length() + 2 + merge


def plan_accurate_logsumexp_rows(rows: int, red: int, *, sm_count: int) -> AccurateExpPlan:
    """The `accurate` logsumexp's plan of rows x red contiguous fp32 rows (both >= 1)."""
    if red <= min(ACCURATE_PIECES_MAX_ROW, ACCURATE_ONE_TILE_MAX_ROW) and _pow2_at_least(red) >= 2 * ACCURATE_PIECE:
        block_n = _pow2_at_least(red)
        rows_a_warp = 32 // (ACCURATE_PIECE // 4)   # a piece's 16-byte vectors across threads, rows across the rest
        return AccurateExpPlan(min(_pow2_at_least(rows), rows_a_warp), block_n, 1, True, 1, red,
                               pieces=block_n // ACCURATE_PIECE)
    if red <= ACCURATE_ONE_TILE_MAX_ROW:
        block_n = _pow2_at_least(red)
        block_rows = max(1, min(_pow2_at_least(rows), ACCURATE_ONE_TILE_ELEMENTS // block_n))
        warps = _pow2_at_most(max(1, min(16, block_rows * block_n // (32 * ACCURATE_PER_THREAD))))
        return AccurateExpPlan(block_rows, block_n, warps, True, 1, red)
    streamed = AccurateExpPlan(1, ACCURATE_STREAM_TILE, ACCURATE_STREAM_WARPS, False, ACCURATE_STREAM_STAGES, red)
    wanted = -(-ACCURATE_MIN_ROWS_PER_SM * sm_count // rows)
    if wanted <= 1:
        return streamed
    tiles = streamed.tiles
    per_part = max(ACCURATE_MIN_PART_TILES, -(-tiles // min(wanted, ACCURATE_MAX_PARTS)))
    parts = -(-tiles // per_part)
    if parts <= 1:
        return streamed
    return replace(streamed, parts=parts, chunk=per_part * ACCURATE_STREAM_TILE)


# logsumexp's `accurate` mode over a strided reduced axis of fp32 input whose kept inner axis is
# contiguous and at least ACCURATE_COLUMNS_MIN_INNER wide (schedules/accurate_columns.py; narrower ones
# take the fp64 mode's passes): tiles of ACCURATE_COLUMNS_LANES rows by up to ACCURATE_COLUMNS_BLOCK_I
# columns, 4 columns a thread (a 16-byte load a lane, all lanes of a column in one thread); the reduced
# axis split into parts of at least ACCURATE_COLUMNS_MIN_PART_TILES tiles until the launch has
# ACCURATE_COLUMNS_WARPS_PER_SM warps per SM (at most ACCURATE_MAX_PARTS parts), merged by a second
# launch whose programs take tiles of ACCURATE_COLUMNS_MERGE_TILE states: as many parts at once as the
# plan has, up to ACCURATE_COLUMNS_MERGE_LANES, by as many outputs as fill the tile.
# The outputs the bound does not keep are recomputed by the same launches in fp64 (the fp64 mode's
# numerics), over those columns alone: coalesced as the first stage, where a recompute output by output
# (schedules/recompute.py) would read each strided column element by element.
ACCURATE_COLUMNS_MIN_INNER = 128
# ... and reduced axes of at least ACCURATE_COLUMNS_MIN_RED (shorter ones take the fp64 mode's passes).
# H200, 2026-12-02, fp32 dim 0, GB/s (bench/sweep_outer.py --op logsumexp --dim 0; torch 235 / 536 /
# 542 / 504 / 404), fp64 mode -> columns: 16x262144 907 -> 563 (2 tiles a column: the fixed cost of the
# four launches and of the results left to the recompute -- lse ~ 3 -- is not amortized), 1024x65536
# 1699 -> 2624, 8192^2 1692 -> 2683, 65536x1024 1622 -> 2561, 262144x256 1349 -> 2203. Axes between 16
# and 1024 were not measured: they keep the fp64 mode. Not taken (same sweep): 16 lanes (8192^2 2583,
# 262144x256 2049), 32 or 8 warps per SM (2506 / 2019 on 8192^2), column blocks of 256 (within 0.5%),
# parts of at least 8 tiles (within 1%), no PDL between the launches (2568 on 8192^2).
# Again after the six-instruction exponential and the unmasked tiles (H200, 2026-12-02,
# bench/probe_accurate_columns.py --shapes 16x262144 --dim 0): the fp64 mode 946 GB/s; columns (MIN_RED 16)
# 560 public, its first stage alone 1066 (15.7 us of the call's 30: the recompute of the ~0.3% of
# columns left, spread over most blocks, costs as much as the first stage); 4 lanes 592 / 1106, 24 warps
# per SM 564 / 1049. Still not taken.
# The recompute's load (H200, 2026-12-02, 1024x65536 dim 0, GB/s): none unkept 2590; every 997th column
# unkept (lse ~ 0) 1213 with dense recompute blocks alone (each streams its part's tiles in fp64 on one
# warp), 2459 with the sparse path (ACCURATE_COLUMNS_SPARSE_MAX); all unkept (log-probabilities) ~1000,
# 0.6x the fp64 mode (the first stage, then an fp64 pass).
ACCURATE_COLUMNS_MIN_RED = 1024
ACCURATE_COLUMNS_BLOCK_I = 512
ACCURATE_COLUMNS_LANES = 8
ACCURATE_COLUMNS_STAGES = 3
ACCURATE_COLUMNS_WARPS_PER_SM = 16
ACCURATE_COLUMNS_MIN_PART_TILES = 4
ACCURATE_COLUMNS_MERGE_TILE = 1024
# The recompute's column blocks (one warp): narrower than the first stage's, so that a few unkept
# columns scattered over the input recompute a few blocks in fp64, not every block.
ACCURATE_COLUMNS_RECOMPUTE_BLOCK_I = 128
# A recompute block with at most ACCURATE_COLUMNS_SPARSE_MAX unkept columns takes them apart, down each
# column in tiles of ACCURATE_COLUMNS_SPARSE_LANES rows, ACCURATE_COLUMNS_SPARSE_WIDTH columns of a
# recompute program's batch side by side.
ACCURATE_COLUMNS_SPARSE_MAX = 8
ACCURATE_COLUMNS_SPARSE_LANES = 256
ACCURATE_COLUMNS_SPARSE_WIDTH = 8
ACCURATE_COLUMNS_MERGE_LANES = 64
ACCURATE_COLUMNS_MERGE_WARPS = 4
# The recompute's launches run fixed grids -- ACCURATE_COLUMNS_RECOMPUTE_PROGRAMS_PER_SM programs per
# SM for the column launch, each taking ACCURATE_COLUMNS_RECOMPUTE_BATCH listed (block, part) pairs at
# once on as many warps, and ACCURATE_COLUMNS_RECOMPUTE_MERGE_PROGRAMS_PER_SM merge programs -- that
# walk a work list of the column blocks holding unkept outputs, filled by the first stage's finishing
# programs: on ordinary data (nothing listed) each of their programs reads the list's length and ends,
# where a grid over every column block read each block's flags.
# H200, 2026-12-02 (bench/probe_accurate_columns.py, fp32 dim 0, randn; us a call, public / first stage
# alone): flag-reading grids 102.9 / 94.3 (1024x65536), 100.5 / 92.8 (8192^2), 105.4 / 98.1
# (65536x1024), 122.9 / 115.8 (262144x256); this list with one-warp walkers 100.9-102.9 at 2-16 per SM
# (the fewer programs, the faster; each program costs ~1 ns of the call), and batched as here 100.7 /
# 98.1 / 102.0 / 120.3. The two launches that remain cost ~4 us of ordinary data's call. What it costs
# elsewhere (same runs, GB/s): every 997th column unkept 2232-2283 / 2264-2330 / 2088-2157 / 1560-1611
# against 2482 / 2486 / 2240 / 1643 with the flag-reading grids (their 330-1024 one-warp programs
# each took one (block, part) at once); all unkept (log-probabilities) 747 / 898 / 883 / 783 (one-warp
# walkers: 665-860 at 8-16 per SM, 258-453 at 2-4; the batched walkers' programs take 240 registers, 2
# per SM). Not taken (same sweeps): 1 program of 8 per SM (public within 0.5%, all unkept -8%), 4 of 2
# (within 0.6%), 1 or 4 recompute merge programs per SM (within 0.6%), sparse columns 4 or 16 at a time
# (scattered -6% / -20% on 1024x65536). Measured and dropped: plans of up to 8 parts merging them in the
# column kernel, the last part of each column block to arrive reading the block's parts (three launches
# a call instead of four): 1024x65536 2568 GB/s against 2658 with the merge launch
# -- the last arrivals' merges serialize at the end of the launch, which costs more than the launch.
ACCURATE_COLUMNS_RECOMPUTE_PROGRAMS_PER_SM = 2
ACCURATE_COLUMNS_RECOMPUTE_BATCH = 4
ACCURATE_COLUMNS_RECOMPUTE_MERGE_PROGRAMS_PER_SM = 2
# The column kernel's later launches (the merge, the fp64 recompute and its merge) as programmatic
# dependents of the launch before each (sm_90).
ACCURATE_COLUMNS_PDL = True


@dataclass(frozen=True)
class AccurateColumnsPlan:
    block_r: int       # a tile's rows (lanes of the reduced axis), a power of two
    block_i: int       # a tile's columns, a power of two
    num_warps: int
    loop_stages: int
    red: int           # the reduced axis' length
    parts: int = 1     # programs a column block's reduced axis is split across
    chunk: int = 0     # reduced elements a part (whole tiles; parts > 1)
    sm_count: int = 1  # the GPU's SMs: the recompute launches' fixed grids

    @property
    def recompute_programs(self) -> int:
        """Programs of the recompute's column launch (a fixed grid walking the work list), at most."""
        return ACCURATE_COLUMNS_RECOMPUTE_PROGRAMS_PER_SM * self.sm_count

    @property
    def recompute_merge_programs(self) -> int:
        """Programs of the recompute's merge launch (split plans), at most."""
        return ACCURATE_COLUMNS_RECOMPUTE_MERGE_PROGRAMS_PER_SM * self.sm_count

    @property
    def tiles(self) -> int:
        """Tiles a part takes: the most rescales a column's state goes through, plus one."""
        return -(-min(self.chunk or self.red, self.red) // self.block_r)

    @property
    def recompute_block_i(self) -> int:
        """Columns a recompute program takes (4 a thread, one warp at most)."""
        return min(self.block_i, ACCURATE_COLUMNS_RECOMPUTE_BLOCK_I)

    @property
    def recompute_batch(self) -> int:
        """Listed (block, part) pairs a recompute program takes at once (a warp each)."""
        return ACCURATE_COLUMNS_RECOMPUTE_BATCH

    @property
    def recompute_num_warps(self) -> int:
        return _accurate_columns_warps(self.recompute_batch * self.recompute_block_i)

    @property
    def merge_lanes(self) -> int:
        """Parts the merge takes at once."""
        return min(ACCURATE_COLUMNS_MERGE_LANES, _pow2_at_least(self.parts))

    @property
    def merge_outputs(self) -> int:
        """Outputs a merge program takes."""
        return max(1, ACCURATE_COLUMNS_MERGE_TILE // self.merge_lanes)

    @property
    def fp64_depth(self) -> int:
        """At most as many fp64 roundings on an element's path (schedules/accurate_columns.py): the
        tile's sum over its lanes, a rescaling product and an addition per later tile, the merge's
        product and its sum over the parts."""
        merge = self.parts + 3 if self.parts > 1 else 0
        return self.block_r + 2 * self.tiles + 2 + merge

    @property
    def recompute_depth(self) -> int:
        """fp64_depth for the recompute, whose sparse path sums tiles of ACCURATE_COLUMNS_SPARSE_LANES rows."""
        lanes = ACCURATE_COLUMNS_SPARSE_LANES
        sparse_tiles = -(-min(self.chunk or self.red, self.red) // lanes)
        return max(self.fp64_depth, self.fp64_depth - self.block_r - 2 * self.tiles + lanes + 2 * sparse_tiles)


def _accurate_columns_warps(block_i: int) -> int:
    """Warps of a column program of block_i columns: 4 columns a thread, 32 threads a warp."""
    return max(1, block_i // 128)


def plan_accurate_logsumexp_columns(outer: int, red: int, inner: int, *, sm_count: int) -> AccurateColumnsPlan | None:
    """The `accurate` logsumexp's plan of an (outer, red, inner) fp32 view reduced over its strided middle
    axis (inner contiguous; all >= 1), or None where inner is narrower than ACCURATE_COLUMNS_MIN_INNER or
    red shorter than ACCURATE_COLUMNS_MIN_RED."""
    if inner < ACCURATE_COLUMNS_MIN_INNER or red < ACCURATE_COLUMNS_MIN_RED:
        return None
    block_i = min(ACCURATE_COLUMNS_BLOCK_I, _pow2_at_least(inner))
    warps = _accurate_columns_warps(block_i)
    single = AccurateColumnsPlan(min(ACCURATE_COLUMNS_LANES, _pow2_at_least(red)), block_i, warps,
                                 ACCURATE_COLUMNS_STAGES, red, sm_count=sm_count)
    programs = outer * -(-inner // block_i)
    wanted = -(-ACCURATE_COLUMNS_WARPS_PER_SM * sm_count // (warps * programs))
    if wanted <= 1:
        return single
    per_part = max(ACCURATE_COLUMNS_MIN_PART_TILES, -(-single.tiles // min(wanted, ACCURATE_MAX_PARTS)))
    parts = -(-single.tiles // per_part)
    if parts <= 1:
        return single
    return replace(single, parts=parts, chunk=per_part * single.block_r)


def plan_logsumexp_rows(rows: int, red: int, *, element_size: int, accumulator_size: int) -> RowPlan | None:
    """The single-read plan of a logsumexp over rows x red contiguous rows (both >= 1), or None where
    the one-pass reduction serves it: rows of at most LOGSUMEXP_SINGLE_READ_MAX_ROW's elements for the
    accumulator and input (the measured cases)."""
    if red > LOGSUMEXP_SINGLE_READ_MAX_ROW.get((accumulator_size, element_size), 0):
        return None
    return plan_single_read(rows, red, j_fast=True, accumulator_size=accumulator_size, element_size=element_size)


# var / std / var_mean in the fp32 accumulator (`fast`) over contiguous fp32 rows of MOMENTS_ROWS_MIN_ROW to
# MOMENTS_ROWS_MAX_ROW elements take the two-pass kernel that holds whole rows in registers
# (schedules/moments_rows.py), MOMENTS_ROWS_PER_THREAD elements a thread on the layer_norm forward's
# tiles (norm_forward_tile); everything else takes the Welford passes. H200, 2026-11-28,
# bench/sweep_outer.py --op var --dim -1, GB/s, two runs, Welford -> two-pass at 64 a thread: fast fp32
# 4096^2 2310 -> 2641/2602, 8192^2 3573 -> 3713/3691, 65536x1024 3526 -> 3652/3673, 262144x256 3482 ->
# 3469/3469, 512x16384 1986 -> 1982/1896 (hence rows up to 8192); at 32 a thread 2527, 3516, 3663,
# 3466, 1572; at 16 2300, 2804, 3090, 2462. Not taken: bf16 input (8192^2 2975 -> 2614 at 64 a thread,
# 2197 at 32; 262144x256 2512 -> 1928; again, two runs, Welford 2927/2931 against 32 a thread with a
# 64-register cap 2568, 16 with the cap 1475, 64 with an 80-register cap 2519; 4096^2, 65536x1024 and
# 2048x6144 lost 4-45% alike), the fp64 accumulator (fp32 8192^2 3519 -> 3290, the other shapes within
# 2%, bf16 -4% to +5%). With the tree's warp levels in one round (2026-11-29), 32 a thread against 64:
# 8192^2 3704 -> 3712, 4096^2 2605 -> 2628, 65536x1024 3657 -> 3670, one run each: within the noise.
# Rows of 256 and more since the per-row divisions became products by host reciprocals (2026-11-29,
# H200, same sweep, fp32 262144x256: Welford 3535, two-pass with divisions 3492, with products 3665;
# the other shapes within 1%). bf16 with the products, Welford -> two-pass at 64 / 32 a thread: 4096^2
# 2024 -> 1935 / 2048, 8192^2 2992 -> 2954 / 3109, 65536x1024 2907 -> 3142 / 2921, 262144x256 2571 ->
# 2514 / 2516: no per-thread count wins everywhere, within the noise mostly -- not taken.
MOMENTS_ROWS_MIN_ROW = 256
MOMENTS_ROWS_MAX_ROW = 8192
MOMENTS_ROWS_PER_THREAD = 64
MOMENTS_ROWS_ELEMENT_SIZES = (4,)   # input element sizes (bytes) that take it


def plan_moments_rows(rows: int, red: int, *, element_size: int, accumulator_size: int) -> RowPlan | None:
    """The two-pass, single-read plan of var / std / var_mean over rows x red contiguous rows (both >= 1),
    or None where the Welford passes serve them: input other than MOMENTS_ROWS_ELEMENT_SIZES' (fp32), an
    accumulator other than fp32's, rows
    outside MOMENTS_ROWS_MIN_ROW..MOMENTS_ROWS_MAX_ROW, or rows whose length is not a multiple of 16
    elements (Triton vectorizes the loads of rows whose stride is: 16-byte loads; others took scalar
    ones and were not measured)."""
    if (element_size not in MOMENTS_ROWS_ELEMENT_SIZES or accumulator_size != 4
            or not MOMENTS_ROWS_MIN_ROW <= red <= MOMENTS_ROWS_MAX_ROW or red % 16):
        return None
    return plan_single_read(rows, red, j_fast=True, accumulator_size=4, element_size=element_size,
                            tile_elements=norm_forward_tile(red), per_thread=MOMENTS_ROWS_PER_THREAD,
                            max_row=MOMENTS_ROWS_MAX_ROW)


@dataclass(frozen=True)
class LoopPlan:
    """softmax's row-loop kernel (schedules/row_loop.py): one program per contiguous row, which it
    reads twice (the second time from L2)."""
    red: int           # row length
    block_n: int       # lanes of stable-exp state, a power of two
    num_warps: int
    stages: int = 1    # num_stages of the loops (norm_row_loop_kernel's; softmax's are plain loops)

    @property
    def depth(self) -> int:
        """Roundings of the row's sum, as an inner pass's: the lane chain, then the fixed tree."""
        return (-(-self.red // self.block_n) - 1) + (self.block_n.bit_length() - 1)


# log_softmax's split-tail kernel on the two-pass path (schedules/split_tail.py, `accurate`): a program's
# (rows, reduced elements) tile by whether the reduced dim is the contiguous one -- a program per
# contiguous row, or 128 strided rows side by side; 2048 fp64 lanes a program on 4 warps -- and the
# reduced elements a program walks (SPLIT_TAIL_PART: a row is split into parts, whose sums
# split_tail_finish_kernel adds). It reads only rows with one maximum and s < 1.5 -- more of randn's than
# expected (split_tail.py) --: with each row walked whole by one program (16 programs of 262144
# contiguous elements, or 2 programs of 128 columns of 262144 over dim 0) the H200 ran `accurate`
# log_softmax over dim 0 at 8-48 GB/s on 65536 x 1024 and 262144 x 256 (fp64's path: 1100-1900). Parts
# of 1024 strided / 16384 contiguous elements: 128 programs or more on DESIGN.md's shapes, each at most
# 64 tiles. Not timed yet (written 2026-12-05 after that run, no device left).
SPLIT_TAIL_TILE = {True: (1, 2048), False: (128, 16)}
SPLIT_TAIL_PART = {True: 16384, False: 1024}
SPLIT_TAIL_FINISH_BLOCK = 256   # rows a program of split_tail_finish_kernel


def split_tail_block_j(red: int, j_fast: bool) -> int:
    """The split-tail kernel's lanes along the reduced dim of length red."""
    return min(SPLIT_TAIL_TILE[j_fast][1], _pow2_at_least(red))


def split_tail_part_length(red: int, j_fast: bool) -> int:
    """The reduced elements one split-tail program walks: whole tiles, at most SPLIT_TAIL_PART's (or
    the row, in whole tiles)."""
    block_j = split_tail_block_j(red, j_fast)
    return block_j * max(1, min(-(-red // block_j), SPLIT_TAIL_PART[j_fast] // block_j))


def split_tail_parts(red: int, j_fast: bool) -> int:
    """The parts a row of length red is split into by the split-tail kernel."""
    return -(-red // split_tail_part_length(red, j_fast))


def split_tail_depth(red: int) -> int:
    """Roundings of a row's tail sum in the split-tail kernel, whichever the layout: the lane chain over
    a part's tiles, the fixed tree over the lanes, then the parts' sums added in order
    (precred.softmax_error_bound's tail_depth)."""
    return max(-(-split_tail_part_length(red, j_fast) // split_tail_block_j(red, j_fast)) - 1
               + split_tail_block_j(red, j_fast).bit_length() - 1 + split_tail_parts(red, j_fast) - 1
               for j_fast in (True, False))


# Rows of at most this many bytes are read twice by one program (beyond the single-read limits), the
# second read partly from L2 (schedules/row_loop.py). Below ROW_LOOP_MIN_ROWS_PER_SM
# rows per SM the two-pass path (whose reduction splits rows across programs) is used instead.
# (lanes, warps) by the accumulator's bytes, from bench/sweep_softmax.py (H100; rows of 65536, fast:
# 4096 x 16 at 1884 fp32 / 1811 bf16 GB/s, best 1915 / 1811; fp64: 2048 x 8 best, 1548 vs two-pass 1476).
ROW_LOOP_MAX_ROW_BYTES = 256 << 10
ROW_LOOP_MIN_ROWS_PER_SM = 2
ROW_LOOP_SHAPE = {4: (4096, 16), 8: (2048, 8)}
# The row-loop kernel's loop stages (num_stages of both reads) by the accumulator's bytes (1: plain
# loops). H100, 2026-12-06, bench/sweep_outer.py --dim -1 --variants default --variant
# "sK:ROW_LOOP_STAGES={4:K,8:K}", GB/s of the input, stages 1 / 2 / 3 / 4: the fp64 accumulator gains --
# softmax fp64 fp32 1024x65536 881 / 769 / 905 / 917, log_softmax accurate fp32 (its split tail in fp64)
# 868 / 840 / 931 / 941; softmax fp64 bf16 558 / 496 / 548 / 549 (the one loss, not a default) --, the
# fp32 accumulator loses: softmax fast fp32 994 / 949 / 956 / 954, bf16 995 / 864 / 925 / 915;
# log_softmax fast bf16 1013 / 886 / 935 / 932, accurate bf16 1006 / 877 / 936 / 930. Rows of 262144
# (16x262144: the two-pass path) within 0.5%.
ROW_LOOP_STAGES = {4: 1, 8: 4}
# The L2 policy of softmax's row-loop first read (its vector-state path: the fast mode), which the
# second read re-reads. H100, 2026-11-26 (ncu, softmax fast fp32 1024x65536): evict_first read 534 MB
# from DRAM for the 256 MB input (no second read hit L2), evict_last 466 MB; sweep_outer --op softmax,
# GB/s of the input, evict_first -> evict_last: fp32 1024x65536 893 -> 956, 512x65536 865 -> 931, bf16
# 867 -> 943, 741 -> 816; log_softmax within 0.3%. Measured and dropped: persistent grids of 0.5 - 2
# programs per SM, 16 or 32 warps, with evict_last (fewer rows in flight: up to all second reads hit,
# 269 MB read at 0.5 per SM, but a program's plain loop cannot pull the bandwidth: 571 - 935 GB/s).
ROW_LOOP_FIRST_READ_EVICTION = "evict_last"


def _row_loop_pays(rows: int, red: int, element_size: int, sm_count: int) -> bool:
    """Whether rows x red contiguous rows take a row loop (softmax's, the norms' forward): rows of at
    most ROW_LOOP_MAX_ROW_BYTES, at least ROW_LOOP_MIN_ROWS_PER_SM of them per SM."""
    return red * element_size <= ROW_LOOP_MAX_ROW_BYTES and rows >= ROW_LOOP_MIN_ROWS_PER_SM * sm_count


@lru_cache(maxsize=4096)
def plan_row_loop(rows: int, red: int, *, element_size: int, accumulator_size: int, sm_count: int,
                  block_n: int | None = None) -> LoopPlan | None:
    """The row-loop plan of a softmax over rows x red contiguous rows, or None where it does not pay
    (rows longer than ROW_LOOP_MAX_ROW_BYTES, or too few rows to fill the GPU). block_n overrides the
    lanes (tests)."""
    if rows < 1 or red < 1:
        raise ValueError("plan_row_loop needs a non-empty softmax")
    if not _row_loop_pays(rows, red, element_size, sm_count):
        return None
    lanes, warps = ROW_LOOP_SHAPE[accumulator_size]
    return LoopPlan(red, min(block_n or lanes, _pow2_at_least(red)), warps, ROW_LOOP_STAGES[accumulator_size])


# layer_norm / rms_norm (precred/norm_launch.py). Forward: rows up to NORM_FORWARD_MAX_ROW elements (by
# the accumulator's bytes) are read once by the single-read kernel, with softmax's tiles
# (plan_single_read) but NORM_FORWARD_PER_THREAD elements per thread for the fp64 accumulator too
# (softmax takes 16). bench/sweep_norm.py, H100, 2026-11-25, after the fp64 kernel stopped keeping
# its converted tile live (schedules/norm_rows.opaque_copy), GB/s at 8 / 16 / 32 per thread (4096-
# element tiles): precise 8192^2 fp32 1275 / 1403 / 2223, bf16 774 / 901 / 1584; 65536x1024 fp32
# 1715 / 1696 / 2598; 262144x256 fp32 2108 / 1823 / 1978, bf16 1718 / 1768 / 1834; fast best at 32
# on every swept shape (16384-element tiles slower everywhere). Again with the register caps below
# (bench/profile_norm.py, layer_norm, 32 / 16 / 8 per thread): fast 8192^2 bf16 2632 / 1128 / 910,
# 65536x1024 bf16 2302 / 1795 / 1411, 262144x256 fp32 2574 / 1891 / 2127; precise likewise, except
# 262144x256 bf16 1703 / 1780 / 1474.
# Longer rows take the Welford statistics and a normalizing pass over
# NORM_APPLY_TILE (rows x columns) tiles. Backward: rows up to NORM_BACKWARD_MAX_ROW are held on chip
# (x, g, xhat, g*w and two partial tiles: more registers than the forward), NORM_BACKWARD_TILE elements
# a program at a time, a program owning a range of rows, NORM_BACKWARD_PROGRAMS_PER_SM programs per SM;
# longer rows are read twice: their sums over NORM_BACKWARD_LOOP_LANES lanes, a program per row, then dx
# and the dw / db partials by column blocks (NORM_BACKWARD_COLUMNS_*).
NORM_FORWARD_MAX_ROW = {4: 16384, 8: 8192}
NORM_FORWARD_PER_THREAD = 32
# Elements of a forward program's tile by row length, {longest row: tile}; longer rows take
# SINGLE_READ_TILE (one row of >= 4096 per program whatever the tile). bench/profile_norm.py, H100,
# GB/s at tiles of 4096 / 2048 / 1024 (fast, precise), layer_norm: 65536x1024 bf16 2476 / 2786 / 2731,
# 2210 / 2741 / 2717 (Liger fast 2779), fp32 2917 / 2899 / 2859, 2787 / 2895 / 2614; 262144x256 fp32
# 2673 / 2815 / 2884, 2201 / 2138 / 2877, bf16 2431 / 2470 / 2556, 2094 / 2088 / 2138; rms_norm
# within 1.5% on all eight. Smaller programs there run 1-2 warps: no register cap (norm_forward_register_cap).
# Again on the H200 (2026-11-28, bench/profile_norm.py --direction forward, one round, GB/s of fast /
# precise): rows of 256 on tiles of 2048 or 4096 (8 or 16 rows a program, Liger's block kernel takes 16
# rows on 4 warps for rms_norm) lost everywhere -- rms_norm bf16 262144x256 3384 -> 3225 / 3342 (Liger
# 3767 in the norm_suite run), layer_norm fp32 4009 -> 3134 / 2848, precise 3453 -> 2265 / 2279; rows
# of 1024 on 4096 lost up to 26% (layer_norm bf16 65536x1024 precise 3077 -> 2273), the rest within 1%.
# Two rows of 8192 (or of 4096) a program, 16 warps, the row reductions sharing their barriers: lost
# everywhere (same day, layer_norm fast fp32 8192^2 3540 -> 2959, bf16 3228 -> 2502, rms_norm fast fp32
# 4048 -> 3519; rows of 4096: fp32 3410 -> 2875, bf16 2587 -> 2203).
NORM_FORWARD_TILES = {256: 1024, 1024: 2048}


def norm_forward_tile(n: int) -> int:
    """The forward's tile for rows of n elements (NORM_FORWARD_TILES)."""
    for longest, tile in sorted(NORM_FORWARD_TILES.items()):
        if n <= longest:
            return tile
    return SINGLE_READ_TILE
# ptxas's register cap for the forward kernel (maxnreg), by the input's element size (none for fp64):
# 128 lets two 8-warp or four 4-warp programs share an SM, 80 three 8-warp or six 4-warp ones. H100,
# GB/s without -> with the cap: fp32 (128) 262144x256 fast 2184 -> 2584 (134 -> 128 registers, 3 -> 4
# programs per SM), precise 2022 -> 2191; 4096^2 precise 2256 -> 2405. 16-bit (bench/profile_norm.py,
# no cap / 96 / 80): layer_norm 8192^2 fast 2053 / 2057 / 2631, precise 1652 / 1656 / 1836; 65536x1024
# fast 2224 / 2221 / 2301, precise 1725 / 1928 / 2004; rms_norm 8192^2 precise 2257 / 2294 / 2586; a
# cap of 128 lost there (65536x1024 fast 2207 -> 1903: ptxas takes up to the cap). The one loss at 80:
# layer_norm precise 262144x256, 1827 -> 1691.
NORM_FORWARD_MAX_REGISTERS = {4: 128, 2: 80}
# Rows of one padded length and input element size whose forward takes other elements per thread and
# another register cap than the defaults above, {(element_size, BLOCK_N): (per_thread, maxnreg)}: each
# puts 32 warps on an SM where the defaults put 16 or 24 (fp32 rows of 4096: 8 warps of 16 elements a thread,
# four programs of 64 registers; 16-bit rows of 8192: four 8-warp programs instead of three). H200,
# bench/profile_norm.py --direction forward, 2026-11-28, GB/s default -> override (two runs for
# layer_norm fp32): layer_norm 4096^2 fp32 fast 3170 / 3142 -> 3410 / 3466, precise 2765 / 2765 ->
# 2851 / 2881; rms_norm 4096^2 fp32 within 0.1%; layer_norm 8192^2 bf16 fast 2944 -> 3226, precise
# 2569 -> 2598; rms_norm 8192^2 bf16 fast 3617 -> 3687, precise 3558 -> 3740; 16-bit rows of 16384
# (two 16-warp programs an SM instead of one; `fast` only: `precise` keeps rows of at most 8192 on
# chip): layer_norm 4096x16384 bf16 fast 1860 -> 2827 (torch 2106). fp32 rows of 8192: 16 warps of 16
# elements a thread, 64 registers -- taken once the tree's warp levels took one shared-memory round
# (tree.tree_sum_across_threads; before, each level was a round, and 16 warps measured layer_norm fast
# +1.5%, precise -3%, rms_norm -2 / -4%): H200, 2026-11-29, bench/profile_norm.py --direction forward,
# 8192^2 fp32 GB/s default -> override: layer_norm fast 3606 -> 3846, precise 2943 -> 3027; rms_norm
# fast 4051 -> 4042, precise 3920 -> 3900 (Liger's layer_norm: 4034 on 2026-11-28). Not taken: the
# 128-register cap there (fast 2418: one program an SM), 32 warps of 8 (2407); the 64-register cap for
# 16-bit rows of 4096 (layer_norm fast -4.6%, precise +7%), 16 elements a thread for 16-bit rows (up to
# -25%), caps of 80 / 96 for fp32 (precise -13% to -31%: the cap is the fp64 accumulator's too).
# 16-bit rows of 256 (one warp, four rows a program): 80 registers, taken once the `fast` forward's rstd
# took fp32 steps with fp64's in the scale's branch (plan.norm_fp32_rstd), which ptxas gave 91: H200,
# bench/profile_norm.py --direction forward, bf16 262144x256 GB/s no cap / 80 / 72, fast: rms_norm
# 3603 / 3757 / 3330, layer_norm 3081 / 3091 / 3012 (65536x1024 with those caps: within 1.3%); again,
# no cap / 80: rms_norm fast 3576 / 3738, precise 3219 / 3125, layer_norm fast 3044 / 3092, precise
# 2174 / 2259 (`precise` shares the key: its 1-warp plan had taken no cap).
NORM_FORWARD_ROW_OVERRIDES = {(4, 4096): (16, 64), (4, 8192): (16, 64), (2, 8192): (32, 64), (2, 16384): (32, 64),
                              (2, 256): (32, 80)}
# layer_norm fast fp32 8192^2 against Liger's (H200, 2026-11-28, ncu, one call): 148 vs 128 us, DRAM 72%
# vs 83%; 50.6M warp instructions vs Liger's 36.4M (our rms_norm: 33.8M, 127 us), 10.8 cycles an issue
# (long scoreboard 4.9, wait 1.1, barrier 1.1) at 25% occupancy (127 registers, two 8-warp programs per
# SM) against Liger's 25 at 50%: a latency-bound chain per program -- the second row reduction and
# c = (x - K) - mu' -- not the bytes. Measured and not taken: w and b (or b alone) loaded right after x,
# before the reductions, as Liger's kernel does (_ab A/B with do_bench, two rounds, layer_norm fast GB/s
# default -> b early): fp32 8192^2 3514/3533 -> 3389/3366, 65536x1024 within 1%, bf16 8192^2 3193/3225
# -> 1444/1444 (spills under the cap), 4096^2 2628/2545 -> 1627/1649; both early: worse again.
# Nor a persistent grid (H100, 2026-12-06, 98a626a: the forward kernel's body in a loop over row blocks
# pipelined through cp.async, as plan.SINGLE_READ_PERSISTENT's; bench/profile_norm.py --direction forward
# --no-profile, every key at (programs a SM, stages) (1, 2) / (2, 2) / (2, 3) / (4, 2), GB/s):
# layer_norm fast fp32 4096^2 2651 -> 1574 / 2310 / 2503 / 2530, bf16 2276 -> 980-2048, 8192^2 fp32 2927
# -> 2342-2794, 65536x1024 2888 -> 1138-2651; precise and rms_norm alike -- every case lost (the default
# runs 4 programs of 8 warps an SM on rows of 4096, whose latency the other programs hide). And its
# rstd, though computed by the same source, differed in the last fp64 bit on 124 of 1059 rows (fp32
# fast, rows of 200): the loop's compilation rounded differently. Removed.
NORM_APPLY_TILE = (8, 512)
# The single-read forward of an fp64 accumulator (`precise`) with 16-bit input and output normalizes in
# fp32 (norm_fp32_pass) for rows of at least NORM_FP32_PASS_MIN_ROW elements. H100, bench/profile_norm.py,
# precise bf16 GB/s fp64 -> fp32 pass: layer_norm 4096^2 1969 -> 2152, 8192^2 2212 -> 2477, 65536x1024
# 2063 -> 2208, 262144x256 2097 -> 1969 (fast: 2224 / 2643 / 2489 / 2424); rms_norm 2270 -> 2305,
# 2740 -> 2834, 2645 -> 2822, 2690 -> 2760. Since rms_norm's rstd by fp32 steps on rows up to 1024
# (norm_fp32_rstd) the pass wins on rows of 256 too: H200, 2026-11-29, rms_norm precise bf16 262144x256
# 3202 -> 3648 GB/s (fast 3769), 65536x1024 3780 -> 3801. (layer_norm's precise 16-bit rows now take
# norm_fp64_mean, fp32 from the centred values on: this pass applies to them only with NORM_FP64_MEAN off.)
NORM_FP32_PASS_MIN_ROW = 256
# Rows beyond NORM_FORWARD_MAX_ROW take the row loop (schedules/norm_row_loop.py: one program per row,
# read twice, the second time from L2) where the row has at most ROW_LOOP_MAX_ROW_BYTES and there are
# ROW_LOOP_MIN_ROWS_PER_SM rows per SM, as softmax's; the streaming path (Welford launch, then
# NORM_APPLY_TILE tiles) otherwise. (lanes of the fp64 Welford state, warps) and the loops' num_stages:
# H100, bench/profile_norm.py, layer_norm fast GB/s, 1024x65536 fp32 / bf16, 512x32768 fp32 / bf16:
# streaming path 1688 / 985 / 1449 / 811; (2048, 8) at 1, 2, 3, 4 stages 1605 / 1162 / 1473 / 1164,
# 1470 / 1029 / 1342 / 987, 1799 / 1443 / 1642 / 1367, 1887 / 1581 / 1713 / 1432 (torch 1757 / 1366 /
# 1284 / 806); (1024, 8) at 4 stages 1879 / 1520 / 1716 / 1254; (4096, 8) at 2 stages 1237 / 821 /
# 1145 / 785. A plain loop keeps a tile of a few KB in flight per program and waits out each load.
NORM_ROW_LOOP_SHAPE = (2048, 8)
NORM_ROW_LOOP_STAGES = 4
NORM_BACKWARD_MAX_ROW = {4: 8192, 8: 4096}
NORM_BACKWARD_TILE = 2048
NORM_BACKWARD_PER_THREAD = 8
NORM_BACKWARD_LOOP_LANES = 2048
NORM_BACKWARD_PROGRAMS_PER_SM = 2
NORM_BACKWARD_STAGES = 3
# Rows beyond NORM_BACKWARD_MAX_ROW (read twice, schedules/norm_stream.py): the columns kernel's
# [rows, columns] tile, warps, loop stages, and the programs per SM its row blocks fill.
NORM_BACKWARD_COLUMNS_TILE = (4, 512)
NORM_BACKWARD_COLUMNS_WARPS = 4
NORM_BACKWARD_COLUMNS_STAGES = 3
NORM_BACKWARD_COLUMNS_PROGRAMS_PER_SM = 4
NORM_BACKWARD_ROW_TERMS_WARPS = 8
# The merge of the backward's dw / db partials (schedules/norm_merge.py): a program's tile is
# [parts, columns] of NORM_MERGE_TILE_ELEMENTS on NORM_MERGE_WARPS warps, its parts the fewest powers of
# two covering the partials up to NORM_MERGE_MAX_PARTS (plan_norm_merge). The tile was (16, 64) on 4
# warps whatever the parts: H100, torch.profiler, merge kernel us (with dw and db loaded in one loop),
# (16, 64) -> (64, 32): layer_norm backward 4096^2 fp32 15.1 -> 7.7, bf16 11.4 -> 7.4, 8192^2 18.8 ->
# 11.4, 65536x1024 12.2 -> 6.0, 262144x256 13.6 -> 6.0 (the backward kernel itself 61-460 us) -- but
# 1024x65536 (5 partial rows) 11.8 -> 27.0, hence fewer parts where there are few: (8, 256) there, 7.9.
# (Before the one loop, with the (16, 64) tile: 21.5, 21.2, 25.2, 16.4, 18.9 and 11.8.)
NORM_MERGE_TILE_ELEMENTS = 2048
NORM_MERGE_MAX_PARTS = 64
NORM_MERGE_WARPS = 4


def plan_norm_merge(n_parts: int, n: int) -> tuple:
    """(parts, columns, warps) of the dw / db merge's tile over [n_parts, n] partials: shapes alone
    decide it, so every bit of the result is the same run to run."""
    block_parts = min(NORM_MERGE_MAX_PARTS, _pow2_at_least(n_parts))
    block_cols = min(_pow2_at_least(n), max(1, NORM_MERGE_TILE_ELEMENTS // block_parts))
    return block_parts, block_cols, NORM_MERGE_WARPS


# Registers of one SM, and the most one program may take (sm_80 .. sm_90).
REGISTER_FILE = 65536


# Plans of fewer warps (a few short rows) take no default cap: it was measured on 4- and 8-warp plans
# only, and it made a 1-warp bf16 plan (3 rows of 100) spill 64 bytes (an override's cap holds anyway).
NORM_FORWARD_CAP_MIN_WARPS = 4


def norm_forward_register_cap(element_size: int, num_warps: int, block_n: int) -> int | None:
    """The forward kernel's maxnreg for rows padded to block_n elements: NORM_FORWARD_ROW_OVERRIDES' (its
    None: no cap), else NORM_FORWARD_MAX_REGISTERS for plans of at least NORM_FORWARD_CAP_MIN_WARPS warps, but never
    more than lets one program of num_warps warps launch (with maxnreg, ptxas no longer fits the
    program to the register file itself: 128 registers on 32 warps failed to launch). None: no cap."""
    override = NORM_FORWARD_ROW_OVERRIDES.get((element_size, block_n))
    if override is not None:   # measured on its own plan, whatever its warps
        cap = override[1]
    elif num_warps >= NORM_FORWARD_CAP_MIN_WARPS:
        cap = NORM_FORWARD_MAX_REGISTERS.get(element_size)
    else:
        cap = None
    return None if cap is None else min(cap, REGISTER_FILE // (32 * num_warps))


def plan_norm_forward(rows: int, n: int, *, accumulator_size: int, element_size: int) -> RowPlan | None:
    """The single-read plan of a layer_norm / rms_norm forward over rows x n contiguous rows of
    element_size-byte input, or None where rows are too long for it."""
    override = NORM_FORWARD_ROW_OVERRIDES.get((element_size, _pow2_at_least(n)))
    return plan_single_read(rows, n, j_fast=True, accumulator_size=accumulator_size,
                            tile_elements=norm_forward_tile(n),
                            per_thread=override[0] if override is not None else NORM_FORWARD_PER_THREAD,
                            max_row=NORM_FORWARD_MAX_ROW[accumulator_size])


def norm_fp32_pass(accumulator: torch.dtype, in_dtype: torch.dtype, out_dtype: torch.dtype, parameter_dtypes,
                   n: int) -> bool:
    """Whether the single-read forward computes xhat = ((x - hi) - lo) * rstd in fp32 from its fp64
    statistics (schedules/norm_rows.py; the mean as an fp32 pair hi + lo): an fp64 accumulator of
    16-bit input whose affine steps run in fp32 already (modes.norm_affine_dtype) -- fp32's roundings
    stay 2^-15 below the output's -- on rows of at least NORM_FP32_PASS_MIN_ROW elements."""
    sixteen_bit = (torch.bfloat16, torch.float16)
    return (accumulator == torch.float64 and in_dtype in sixteen_bit and n >= NORM_FP32_PASS_MIN_ROW
            and norm_affine_dtype(accumulator, out_dtype, parameter_dtypes) == torch.float32)


# precise layer_norm of 16-bit input and output on rows on chip: the mean by an fp64 sum, every other
# step in fp32 with the mean as an fp32 pair (norm_fp64_mean). False: the fp64 accumulator throughout
# (bench/ compares the two).
NORM_FP64_MEAN = True


def norm_fp64_mean(accumulator: torch.dtype, in_dtype: torch.dtype, out_dtype: torch.dtype, parameter_dtypes,
                   rms: bool) -> bool:
    """Whether the single-read forward of layer_norm takes its mean alone in fp64 and runs the rest in
    fp32 (schedules/norm_rows.py fp64_mean_as_pair: c = (x - hi) - lo, the mean as an fp32 pair, as the
    streaming pass's): `precise` (an fp64 accumulator) of 16-bit input whose affine steps run in fp32
    (modes.norm_affine_dtype: 16-bit output, no fp64 parameter). The mean keeps its fp64 accuracy,
    which is what `precise` is for; the centred values, the variance and xhat take fp32's roundings,
    2^-15 below the output's (bounds.norm_error_bound), without the fp64 conversions and arithmetic
    per element that made `precise` conversion-bound."""
    sixteen_bit = (torch.bfloat16, torch.float16)
    return (NORM_FP64_MEAN and not rms and accumulator == torch.float64 and in_dtype in sixteen_bit
            and norm_affine_dtype(accumulator, out_dtype, parameter_dtypes) == torch.float32)


# `precise` (an fp64 accumulator of narrower input) takes rstd's fp32 steps (norm_fp32_rstd) on rows of
# at most this many elements: there a program holds several rows a thread, each running the chain. On
# longer rows a program runs it once, and the fp32 steps' code beside fp64's only costs registers:
# sm_90, layer_norm precise bf16 8192^2 at its 64-register cap spilled 0 -> 188 bytes with them.
NORM_PRECISE_FP32_RSTD_MAX_ROW = 1024


def norm_fp32_rstd(accumulator: torch.dtype, in_dtype: torch.dtype, out_dtype: torch.dtype, n: int) -> bool:
    """Whether the single-read forward takes rstd = 1 / sqrt(q / n + eps) by correctly rounded fp32 steps
    rather than fp64 ones (schedules/norm_rows.py rstd_in_fp32), where they fit: 16-bit output, whose
    unit is 2^15 times the 3 u32 they add to rstd (3.5 for an fp64 accumulator, whose q is rounded to
    fp32 first), of an fp32 accumulator (`fast`), or of an fp64 one of narrower input (`precise`) on
    rows of at most NORM_PRECISE_FP32_RSTD_MAX_ROW elements. The
    fp64 steps' divisions and square root, run for each of a program's rows by every thread, were the
    latency of short rows. H200, bench/profile_norm.py --direction forward, fast bf16 GB/s fp64 ->
    fp32 steps (2026-11-29): rms_norm 262144x256 3409 -> 3603 (3738 / 3757 with 80 registers), 65536x1024
    within 0.3%; layer_norm 262144x256 2772 -> 3081, 65536x1024 3423 -> 3573; 8192^2 and 4096^2 within
    2% (earlier form). With the fp64 steps compiled out altogether (an experiment: wrong for extreme
    rows) rms_norm 262144x256 read 3803 and layer_norm 3330. fp32 input: within 1% of the fp64 steps
    (memory-bound there; its fp32 output would feel the 3 u32): not taken."""
    if in_dtype == torch.float64 or out_dtype not in (torch.bfloat16, torch.float16):
        return False
    return accumulator == torch.float32 or n <= NORM_PRECISE_FP32_RSTD_MAX_ROW


def plan_norm_row_loop(rows: int, n: int, *, element_size: int, sm_count: int) -> LoopPlan | None:
    """The row-loop plan of a layer_norm / rms_norm forward over rows x n contiguous rows (too long for
    plan_norm_forward), or None where the streaming path serves (rows beyond ROW_LOOP_MAX_ROW_BYTES, or
    too few rows to fill the GPU). LoopPlan.depth is the lane chain and tree of the Welford state."""
    if not _row_loop_pays(rows, n, element_size, sm_count):
        return None
    lanes, warps = NORM_ROW_LOOP_SHAPE
    return LoopPlan(n, min(lanes, _pow2_at_least(n)), warps, NORM_ROW_LOOP_STAGES)


@dataclass(frozen=True)
class NormBackwardPlan:
    on_chip: bool          # rows held in registers (norm_backward_kernel), else read twice (norm_stream.py)
    block_rows: int        # rows per tile (the columns kernel's BLOCK_R for rows read twice)
    block_n: int           # the row padded to a power of two (on chip), or the row terms kernel's lanes
    num_warps: int         # warps of the on-chip kernel, or of the columns kernel
    rows_per_program: int  # a multiple of block_rows: rows per program, or per row block of the columns kernel
    n: int                 # row length
    loop_stages: int = 1   # num_stages of the on-chip kernel's row loop or the columns kernel's (1: plain)
    block_c: int = 0       # rows read twice: the columns kernel's BLOCK_C

    @property
    def depth(self) -> int:
        """Roundings of a row sum (mean(g w), mean(g w xhat)): lane chain, then the fixed tree."""
        return (-(-self.n // self.block_n) - 1) + (self.block_n.bit_length() - 1)


@lru_cache(maxsize=4096)
def plan_norm_backward(rows: int, n: int, *, element_size: int, accumulator_size: int,
                       sm_count: int) -> NormBackwardPlan:
    if rows < 1 or n < 1:
        raise ValueError("plan_norm_backward needs a non-empty input")
    programs_wanted = NORM_BACKWARD_PROGRAMS_PER_SM * sm_count
    block_n = _pow2_at_least(n)
    if block_n <= NORM_BACKWARD_MAX_ROW[accumulator_size]:
        block_rows = max(1, min(_pow2_at_least(rows), NORM_BACKWARD_TILE // block_n))
        warps = _pow2_at_most(max(1, min(16, block_rows * block_n // (32 * NORM_BACKWARD_PER_THREAD))))
        row_blocks = -(-rows // block_rows)
        blocks_per_program = -(-row_blocks // programs_wanted)
        # The pipelined loop stages the next tiles of x and g in shared memory while this one is reduced;
        # the stages of NORM_BACKWARD_PROGRAMS_PER_SM programs must fit one SM's shared memory. Not where
        # the warp cap leaves more than NORM_BACKWARD_PER_THREAD elements per thread: there it spilled
        # (H100, rows of 8192 fp32: 232 bytes a thread, kernel 577 vs 455 us unpipelined), while rows of
        # 4096 (77 vs 98 us), 1024 (313 vs 337) and 256 (304 vs 327) gained (bench/profile_norm.py).
        stages = _stages_fitting(NORM_BACKWARD_STAGES, block_rows * block_n * 2 * element_size,
                                 PIPELINE_SMEM_BYTES // NORM_BACKWARD_PROGRAMS_PER_SM)
        if block_rows * block_n > 32 * warps * NORM_BACKWARD_PER_THREAD or blocks_per_program == 1:
            stages = 1
        return NormBackwardPlan(True, block_rows, block_n, warps, blocks_per_program * block_rows, n, stages)
    # Rows read twice: the row terms kernel (a program per row, `lanes` lanes), then the columns kernel
    # over column blocks x row blocks, as many row blocks as fill NORM_BACKWARD_COLUMNS_PROGRAMS_PER_SM
    # programs per SM (each leaves a partial row of dw / db).
    lanes = min(block_n, NORM_BACKWARD_LOOP_LANES)
    block_r, block_c = NORM_BACKWARD_COLUMNS_TILE
    column_blocks = -(-n // block_c)
    row_tiles = -(-rows // block_r)
    row_blocks = max(1, min(row_tiles, -(-NORM_BACKWARD_COLUMNS_PROGRAMS_PER_SM * sm_count // column_blocks)))
    rows_per_block = -(-row_tiles // row_blocks) * block_r   # whole row tiles per block
    return NormBackwardPlan(False, block_r, lanes, NORM_BACKWARD_COLUMNS_WARPS, rows_per_block, n,
                            NORM_BACKWARD_COLUMNS_STAGES, block_c)


# The exact mode's recompute launch (schedules/recompute.py): at most RECOMPUTE_OUTPUTS outputs per
# program (their flags are read at once: an all-certified block costs one load), the tile of the limb
# accumulator, and the fewest elements a chunk of a row gets when few rows are split across programs.
RECOMPUTE_OUTPUTS = 1024
RECOMPUTE_TILE = 256
RECOMPUTE_MIN_CHUNK = 16 * RECOMPUTE_TILE   # shorter rows are never split: no zeroed scratch, one launch
# Rows along a strided axis (dim 0 of a matrix: an element a sector, each tile of a chunk one round of
# load latency) are cut from RECOMPUTE_COLUMN_MIN_CHUNK elements on. Equal to RECOMPUTE_MIN_CHUNK until
# measured: a lone uncertified column costs ~32-36 us on an H100 (docs/exact.md, one cancelling column
# of 8192^2 over dim 0: exact / fast 0.60 bf16, 0.75 fp32), in two chunks of 16 tiles each; chunks of
# one tile (256, as logsumexp's EXP_RECOMPUTE_COLUMN_MIN_CHUNK) would make it one round of loads on 32
# programs, at the price of 32 chunks' limb atomics per column where every column is uncertified.
# To decide: bench/exact_fallback.py --only "\(8192, 8192\) 0|\(65536, 1024\) 0" --set
# RECOMPUTE_COLUMN_MIN_CHUNK=256 against 4096, same machine. (H100, 2026-12-08, bench/sweep_outer.py's
# own N(0, 1) bf16 8192^2 over dim 0 -- torch.randn on the GPU -- ran exact at 1360-1382 GB/s in four
# rounds against fast's 2241-2243, where exact_fallback's CPU-drawn data gives ~2050: most likely one
# uncertified column, a tie whose m was too small for fp32's grid; strategies/exact.py now takes the
# input format's grid, which makes such bf16 ties exactly known. Not confirmed on a GPU yet.)
RECOMPUTE_COLUMN_MIN_CHUNK = RECOMPUTE_MIN_CHUNK
# Programs per SM of the recompute launches: what stays resident at their register counts (~190 for
# recompute_kernel: 2 programs of 4 warps per SM; exp_recompute_kernel at most 128, its cap
# EXP_RECOMPUTE_MAX_REGISTERS: 4). The launch takes
# as few outputs per program as keep it within that many programs, so that on ordinary data (all
# certified) it is one round of programs reading their flags once, and an uncertified row still has
# every resident program at work (more programs would only queue). H100, ncu, exact sum of
# 8192 x 8192 bf16: 1024 programs of 8 outputs (4 rounds) took 4.6 us of a 55 us call, 3-5 us on
# every shape, for flags all set.
RECOMPUTE_PROGRAMS_PER_SM = 2
EXP_RECOMPUTE_PROGRAMS_PER_SM = 4
# On a GPU, the recompute is a programmatic dependent launch (PDL, sm_90): the filter's last pass
# triggers it as its programs start, its programs wait (griddepcontrol.wait) for that pass's writes.
# H100, bench/sweep_outer.py --modes fast,exact, GB/s of exact with 8 programs per SM and no PDL (the
# launch before), 2 per SM, 2 per SM and PDL: rows 16x262144 fp32 886, 921, 1016 (fast 1145), bf16
# 539, 551, 626; 8192^2 bf16 2078, 2129, 2188; 65536x1024 bf16 2107, 2158, 2211; 1024x65536 bf16 2111,
# 2133, 2197; dim 0 16x262144 fp32 907, 991, 1085; bf16 536, 594, 670; logsumexp fp64 bf16
# 16x262144 538 (4 per SM, no PDL) -> 595, 8192^2 2210 -> 2276.
RECOMPUTE_PROGRAMMATIC_LAUNCH = True
# Likewise every pass of a reduction after the first (the previous pass triggers it; it waits for the
# states that pass writes before reading them), for the strategies named here (precred.strategies
# ids: plain sums, Welford) with fp32 accumulators. H100, bench/sweep_outer.py --dim 0, GB/s without ->
# with: fast fp32 1024x65536 2577/2580 -> 2624/2621 (two runs), 8192^2 2561 -> 2603, 65536x1024 2528 ->
# 2574, 262144x256 2365 -> 2398, bf16 +3% alike; var fast fp32 8192^2 2414 -> 2479, bf16 1791 -> 1831.
# Where a second pass's programs are heavy, resident early they crowd the first pass: fp64 sums lost
# up to 17% (bf16 65536x1024 2021 -> 1684), kahan 5-15%, the exact filter up to 20% (1806 -> 1436),
# logsumexp 20% (1874 -> 1499), argmax 23%; pairwise moved both ways (+-5%), amax +2% but 65536x1024 bf16
# 2004 -> 1548. Those keep ordinary launches.
PASS_PROGRAMMATIC_LAUNCH = frozenset({0, 2})
# With fp64 accumulators, by input element size: the strategies whose passes launch that way too (Welford,
# var's default fp64 mode, on 16-bit input). H200, 2026-12-04, bench/sweep_outer.py --op var --dim 0
# --modes fp64, two rounds, GB/s ordinary -> dependent launches: bf16 1024x65536 2008/2009 -> 2051/2045,
# 8192^2 2063/2062 -> 2115/2106, 65536x1024 1947/1945 -> 1995/1982, 262144x256 2101/2097 -> 2175/2166,
# 4096^2 1269/1274 -> 1329/1326, 16x262144 838/848 -> 846/792; fp32 within -3% to +3% (262144x256
# 3190/3184 -> 3106/3100, 4096^2 2060/2062 -> 2131/2129, the 256 MiB shapes +1-2%): not taken.
# (bench/profile_kernels.py: the two launches of var fp64 over dim 0 leave 4-5 us between them.)
# The exact filter (7) on bf16 too, H100, 2026-12-06, bench/sweep_outer.py --op sum --modes fast,exact
# --dtypes bfloat16 --variant "pdl7:PASS_PROGRAMMATIC_LAUNCH_FP64={2: {2, 7}}" --repeat 2, exact GB/s
# ordinary -> dependent launches: dim 0 262144x256 1913/1909 -> 1900/1942, 8192^2 2044/2037 ->
# 2076/2039, 1024x65536 2055/2063 -> 2055/2099, 65536x1024 and 16x262144 even; rows (dim -1) within
# 0.3%: within the runs' spread, not taken (the issue 7 miss, exact / fast on 262144x256 over dim 0,
# stays ~0.88-0.90).
PASS_PROGRAMMATIC_LAUNCH_FP64 = {2: frozenset({2})}
# The exact mode in one launch: where the filter is one inner pass over the input (no split) of at
# most EXACT_ONE_LAUNCH_MAX_BYTES, its programs recompute their own uncertified rows
# (schedules/recompute.py certify_or_recompute) -- no flags, no recompute launch. A small call's time is
# host time, a launch each; SPLIT_MIN_BYTES: below it no plan splits. H100, 2026-11-26 (an A/B of this
# constant at 0 and 4 MiB, one process): the (64, 4096) fp32 loop 2.11x -> 1.27x torch's per call (fast
# 1.25-1.28x); do_bench one vs two launches, fp32 rows, 64x4096 7.1 vs 8.4 us, 1024x1024 8.8 vs 9.8,
# 256x4096 11.3 vs 11.3 -- and on rows that are all uncertified (bench/exact_fallback.py's
# cancelling_rows) 35 vs 21 us, 39 vs 37, 32 vs 32: the
# program's few lanes recompute its own rows. Not the outer schedule: its programs own hundreds of
# columns, recomputed one by one (64x4096 over dim 0, all uncertified: 1817 us against 73).
# The superaccumulator's lanes there: 32 per warp, one element per thread and tile (16 int64 limbs,
# 32 registers a thread); the kernel's registers still grow (sm_90, 64x4096 fp32: 63 -> 108), which
# small inputs do not feel.
EXACT_ONE_LAUNCH_MAX_BYTES = SPLIT_MIN_BYTES
# Measured, not taken: what the recompute launch costs where the filter certifies everything. H100,
# 2026-11-28, three rounds, GB/s of precred.sum(mode="exact") on N(0, 1) data with the recompute launch
# -> without it (timing only): 16x262144 dim=-1 fp32 1042-1044 -> 1083-1147 (torch 889-926), bf16
# 629-630 -> 664-705; dim=0 fp32 1125 -> 1181-1251, bf16 716-720 -> 762-819; 1024x65536 bf16 2331-2343
# -> 2363-2378; 262144x256 bf16 2105-2107 -> 2165-2169. The split's fused merge could finish its row
# with certify_or_recompute (one launch, as above), but then one program recomputes a whole uncertified
# row: a 1 MiB row of 16x262144 on one program's 128 lanes instead of recompute_kernel's chunks across
# the GPU (docs/exact.md: one cancelling row of 16x262144 costs 39 us today) -- tens of times slower
# on the inputs exact exists for.


# The exact mode in one launch over a strided axis: where the filter is one outer pass over columns of at
# most EXACT_ONE_LAUNCH_MAX_COLUMN elements (16 x 262144 over dim 0), its programs recompute their own
# uncertified columns (schedules/recompute.py certify_or_recompute_columns): a thread a column, a warp's
# columns side by side (coalesced, as the filter read them), EXACT_ONE_LAUNCH_COLUMN_ROWS rows a step.
# A program's work there is bounded by its own columns' elements: a lone uncertified column costs its
# column's loads on one thread, every column uncertified costs the programs a second read of their
# block with the limbs' integer work. (sm_90: 16 x 262144 fp32 over dim 0, 124 -> 119 registers, the
# filter's loop 127 instructions either way; the rows a step as a 2-D tile took 229.) H200, 2026-12-04,
# bench/sweep_outer.py --op sum --dim 0 --modes fast,exact, two rounds, GB/s of exact, two launches ->
# one: 16 x 262144 fp32 1355/1355 -> 1502/1419 (fast 1524-1542), bf16 817/822 -> 936/933 (fast
# 943-1016); bench/exact_fallback.py, 16 x 262144 fp32 over dim 0: ordinary 1328 -> 1492, every column
# cancelling 4 -> 254 (recompute_kernel read each 16-element column down its stride), one cancelling
# column 1025 -> 881 (its program's group of 64 columns recomputed and finished on one warp), 956 once
# the groups with nothing to recompute were skipped by one reduction each (the suite's run of d674a45).
EXACT_ONE_LAUNCH_MAX_COLUMN = 64
EXACT_ONE_LAUNCH_COLUMN_ROWS = 8


def exact_in_one_launch(plan: Plan, input_bytes: int) -> bool:
    """Whether the exact mode's filter pass of `plan` also recomputes what it cannot certify."""
    if len(plan.passes) != 1:
        return False
    p = plan.passes[0]
    if p.schedule == "inner":
        return input_bytes <= EXACT_ONE_LAUNCH_MAX_BYTES
    return p.red <= EXACT_ONE_LAUNCH_MAX_COLUMN


def one_launch_recompute_tile(p: Pass) -> int:
    """The superaccumulator's lanes when the filter pass p recomputes its own outputs: along the row
    (inner), or columns side by side (outer, at most the program's)."""
    return 32 * p.num_warps if p.schedule == "inner" else min(32 * p.num_warps, p.block_kept)


# logsumexp's fp32 filter (strategy 10: `accurate` / `fp64` over 16-bit input) planned as one inner pass
# (one part a row) over rows of CERTIFIED_EXP_ONE_LAUNCH_RED elements (a closed range; None: never) finishes
# the rows it cannot certify in the same program, in fp64 (schedules/recompute.py certify_exp_or_recompute,
# the recompute's own code), EXP_FINISH_PER_THREAD fp64 terms a thread a tile: no recompute launch -- as
# the accurate fp32 kernel's held rows (ACCURATE_FINISH_PER_THREAD). sm_90 (bench/kernel_resources.py,
# bf16 262144x256 / 8192^2 / 65536x1024, fp16 4096^2): the pass's registers 26-30 -> 30-32 at 1 term a
# thread (16 programs of 4 warps an SM still), 37-38 at 2, 40-45 at 4, 61-62 at 8 (half the programs);
# SASS 440-496 -> 720-752 (outside the loop).
# H100, 2026-12-06, bench/probe_accurate_columns.py --dim 1 (the public `accurate` call, GB/s), the
# recompute launch -> one launch at 8 terms a thread, on randn rows / "dense" log-probability rows (every
# row left to the fp64 finish): bf16 rows of 64 1813 -> 1647 / 179 -> 750, 128 1927 -> 1778 / 271 -> 825,
# **256 1888 -> 1976 / 484 -> 907**, **512 2040 -> 2027 / 525 -> 910**, 1024 2206 -> 1955 / 587 -> 852,
# 2048 2238 -> 2010, 8192 2119 -> 2190, 65536 unchanged (split: not one pass); fp16 64 -8%, 128 -6%,
# **256 1708 -> 1829 (+7%)**, **512 1936 -> 1974**, 1024 -11%, 2048 -10%; every 997th row left: bf16 256
# 1883 -> 1945. At 4 terms a thread rows of 256 +0.5% / +4%, 1024 -10%; at 2, 1 every shape lost (1: -8
# to -25%). So on for rows of 256 and 512 only (the short rows' extra registers halve their programs, the
# long rows' fp64 tile costs more than the launch it spares); ruled by the row length, which picks the
# pass's tile (129-256: 256, 257-512: 512).
CERTIFIED_EXP_ONE_LAUNCH_RED = (129, 512)
EXP_FINISH_PER_THREAD = 8


def certified_exp_in_one_launch(plan: Plan) -> bool:
    """Whether logsumexp's fp32 filter pass of `plan` also finishes what it cannot certify, in fp64: one
    inner pass of one part a row (a program holds its rows whole) over rows of CERTIFIED_EXP_ONE_LAUNCH_RED."""
    if CERTIFIED_EXP_ONE_LAUNCH_RED is None or len(plan.passes) != 1 or plan.fused_merge:
        return False
    p = plan.passes[0]
    low, high = CERTIFIED_EXP_ONE_LAUNCH_RED
    return p.schedule == "inner" and p.parts == 1 and low <= p.red <= high


def accurate_rows_fp64_depth(rows: int, red: int, *, sm_count: int) -> int:
    """The fp64 tree depth of the rows the `accurate` fp32 rows kernel's bound does not keep
    (plan_accurate_logsumexp_rows): held rows' own finish (AccurateExpPlan.finish_depth), streamed ones'
    recompute launch (plan_exp_recompute). The depth the fp64 part of its bound takes."""
    p = plan_accurate_logsumexp_rows(rows, red, sm_count=sm_count)
    return p.finish_depth if p.one_tile else plan_exp_recompute(rows, red, sm_count=1, strided=False).depth


def certified_exp_fp64_depth(plan: Plan, n_out: int, red: int, *, sm_count: int, strided: bool) -> int:
    """The fp64 tree depth of the outputs logsumexp's certified fp32 filter, planned as `plan`, leaves to
    fp64 (n_out outputs of red elements): its own launch's finish (certified_exp_in_one_launch,
    exp_finish_depth) or the recompute launch's (plan_exp_recompute). The depth its bound takes
    (precred.logsumexp_error_bound): the certified outputs are within their rounding alone."""
    if certified_exp_in_one_launch(plan):
        return exp_finish_depth(plan.passes[0])
    return plan_exp_recompute(n_out, red, sm_count=sm_count, strided=strided).depth


def exp_finish_lanes(p: Pass) -> int:
    """The fp64 lanes along each row in that finish: EXP_FINISH_PER_THREAD terms a thread a tile over
    the program's block_kept rows, a power of two, at most the row's length rounded up."""
    per_tile = EXP_FINISH_PER_THREAD * 32 * p.num_warps // p.block_kept
    return max(1, min(_pow2_at_least(p.red), _pow2_at_most(per_tile)))


def exp_finish_depth(p: Pass) -> int:
    """The fp64 additions on a term's path in that finish: one a tile after the first along its lane,
    then the fixed tree over the lanes (the fp64 mode's bound at this depth)."""
    lanes = exp_finish_lanes(p)
    return -(-p.red // lanes) - 1 + lanes.bit_length() - 1


def _recompute_block_outputs(n_out: int, chunks: int, programs: int) -> int:
    """The fewest outputs per program (a power of two, at most RECOMPUTE_OUTPUTS) with which n_out
    outputs, `chunks` programs per block of them, take at most `programs` programs."""
    block_outputs = 1
    while block_outputs < RECOMPUTE_OUTPUTS and -(-n_out // block_outputs) * chunks > programs:
        block_outputs *= 2
    return block_outputs


@dataclass(frozen=True)
class RecomputePlan:
    block_outputs: int   # outputs per program, a power of two
    block_r: int         # elements per tile of a row
    chunk: int           # elements of a row per program, a multiple of block_r
    chunks: int          # programs per row (> 1: limb sums merged with integer atomics)
    num_warps: int


@lru_cache(maxsize=4096)
def plan_recompute(n_out: int, red: int, *, sm_count: int, min_chunk: int | None = None) -> RecomputePlan:
    """Rows longer than min_chunk (default RECOMPUTE_MIN_CHUNK) elements are cut into chunks of about
    that many, one program each -- as many chunks as RECOMPUTE_PROGRAMS_PER_SM programs per SM hold
    with RECOMPUTE_OUTPUTS outputs a program -- then the outputs per program are the fewest that keep
    the launch within those programs (_recompute_block_outputs). Chunks first, so that an uncertified
    long row, or a long strided column, is streamed by `chunks` programs rather than by one alone
    (65536 x 1024 over dim 0 with one uncertified column: its program read all 65536 strided
    elements); a program's serial work, its uncertified outputs times its chunk, stays about what it
    was with one chunk a row and fewer outputs a program. H100, do_bench of the exact sum with one
    cancelling output among N(0, 1) data (bench/exact_fallback.py's rows), chunks after -> before the
    output blocks: 65536x1024 fp32 dim 0 410 -> 139 us, 8192^2 dim 0 160 -> 143, 1024x65536 rows 326
    -> 127, 16x262144 78 -> 39, bf16 8192^2 rows 94 -> 88; on the N(0, 1) data alone within 1%."""
    min_chunk = RECOMPUTE_MIN_CHUNK if min_chunk is None else min_chunk
    programs = RECOMPUTE_PROGRAMS_PER_SM * sm_count
    chunks = max(1, min(-(-red // min_chunk), programs // -(-n_out // RECOMPUTE_OUTPUTS)))
    chunk = -(-red // chunks)
    chunk = -(-chunk // RECOMPUTE_TILE) * RECOMPUTE_TILE
    chunks = -(-red // chunk)
    block_outputs = _recompute_block_outputs(n_out, chunks, programs)
    return RecomputePlan(block_outputs, RECOMPUTE_TILE, chunk, chunks, 4)


# logsumexp's fp64 recompute of the rows its fp32 filter did not certify (schedules/recompute.py,
# exp_recompute_kernel): outputs per program as the exact mode's (_recompute_block_outputs, for
# EXP_RECOMPUTE_PROGRAMS_PER_SM), each uncertified row read in tiles of EXP_RECOMPUTE_TILE fp64 lanes
# (8 per thread at 4 warps). Rows longer than EXP_RECOMPUTE_MIN_CHUNK are cut into chunks of about that
# many elements, one program each (at most EXP_RECOMPUTE_MAX_CHUNKS): a row's fp64 exponentials are
# compute-bound on one SM (H100: an uncertified row of 65536 took ~50 us alone, the whole filter pass
# over 1024 such rows ~65 us), and a strided one is bound by its loads' latency. Rows along a strided
# axis (dim 0 of a matrix: an element a sector) take EXP_RECOMPUTE_COLUMN_TILE and
# EXP_RECOMPUTE_COLUMN_MIN_CHUNK instead -- a chunk one tile, so that an uncertified column costs one
# round of loads on each of its programs. The chunks' states are merged by the last to arrive.
# Strided rows also go in groups of EXP_RECOMPUTE_COLUMN_GROUP adjacent ones (columns of dim 0: 32
# bf16 columns are two 32-byte sectors -- 16 until 2026-12-07, below; columns of at most 128 in wider
# groups: column_group): a group with at least EXP_RECOMPUTE_COLUMN_GROUP_MIN uncertified columns is
# redone whole in [columns, EXP_RECOMPUTE_COLUMN_GROUP_TILE] tiles (a tile's rows are sectors, not an
# element each; tiles of 32 rows -- 64 since the one pass below --, the fp64 exponentials of 4-8
# elements a thread, keep the kernel near 128 registers where a group's chunk as one tile took ~250),
# the others one at a time as above. H200, 2026-12-04, bench/probe_accurate_columns.py --dtype
# bfloat16 --dim 0, GB/s, one column at a time -> groups: dense 8192^2 91 -> 370, 65536x1024 97 -> 221,
# 1024x65536 112 -> 367, 16x262144 18 -> 109, 262144x256 41 -> 222, 64x65536 47 -> 164 (torch 160-375:
# 0.65-1.0x); ordinary (randn) within 1-2% (2106 / 2101 / 2018 / 555 -> 2095 / 2050 / 2026 / 550;
# bench/profile_kernels.py, the recompute launch with groups -> without: 16x262144 10.0 / 9.7 us,
# 8192^2 13.4 / 13.1). Measured and
# not kept: every group with an uncertified column redone whole, no lone path (randn 8192^2 2106 ->
# 1729-1916 in tiles of 32-64 rows: a scattered column then costs its group's 8-16 rounds of loads, twice),
# a group's chunk as one tile of 256 or 512 rows (dense 173-209, randn 1708-1888 on 8192^2: 250
# registers), the lone columns taken inside the group loop (randn 16x262144 +1.7 us: 80 registers
# against 40), tiles of 16 / 64 rows (dense 8192^2 255 / 230), group minimum 2 / 8 (within 1-2% of 4).
# Contiguous rows go in groups too (EXP_RECOMPUTE_GROUP, _GROUP_TILE, _GROUP_MIN): a group's rows'
# loads in flight together where a lone row's tiles are one round after another. H200, 2026-12-04,
# probe_accurate_columns.py --dim 1, dense (every row recomputed), GB/s, no groups -> groups of 4 in
# tiles of 256: fp32 (the `accurate` rows' recompute) 1024x65536 584 -> 770, 262144x256 316 -> 572,
# 65536x1024 650 -> 697; bf16 378 -> 516, 153 -> 395, 366 -> 440 (torch 317-556: all >= 1.13x);
# ordinary rows within 1%. Groups of 8 in tiles of 256: 723 / 637 / 524; of 4 in tiles of 512: 457 /
# 574 / 662.
# Where the filter certifies (most rows of ordinary data, precred.bounds.certified_log_sum_margin)
# this launch reads its flags and stops.
# H200, 2026-12-04, bench/probe_accurate_columns.py (GB/s; "dense": log-probabilities, every output
# recomputed), with the maximum-first chunks of exp_recompute_kernel: columns, bf16 over dim 0,
# chunks of 4096 in tiles of 1024 -> one tile of 512: 8192^2 1517 -> 2088 (4.1x -> 5.6x torch),
# 65536x1024 1513 -> 2078, 1024x65536 1967 -> 2012, dense 49 / 53 / 90 -> 91 / 96 / 112 (one tile of
# 1024: 2074 / 2006 / 1995; of 256: 2187 / 2098 / 1977 but dense 65 / 63 / 73). Contiguous rows keep
# 4096 / 1024: one-tile chunks of 1024 there moved bf16 1024x65536 2213 -> 2352 but dense 379 -> 224, fp32
# 1024x65536 dense 583 -> 380 (its ordinary rows within 1%). Against the online chunks before it
# (running maximum, stable_exp_combine's chain over the chunks; same constants): bf16 dim 0 8192^2
# 1533 -> 1517, 1024x65536 1670 -> 1967; rows bf16 1024x65536 2122 -> 2209, dense 310 -> 380, fp32
# 1024x65536 dense 488 -> 583, 65536x1024 356 -> 650 (ordinary fp32 rows within 1%).
# Measured and not kept (H200, 2026-12-04, bench/probe_accurate_columns.py --dtype bfloat16 --dim 0, GB/s,
# randn): the certified pass over short columns (one outer pass, columns of at most 64) recomputing its
# own uncertified columns in fp64, as the exact mode's one launch does (a thread a column, maximum
# first; no flags, no recompute launch; tests passed on the H200): 16 x 262144 501 -> 241, 32 x 131072
# 414 -> 183, 64 x 4096 35 -> 7, 64 x 65536 (two passes: unchanged) 433 -> 447; every column
# recomputed 11 -> 107, 18 -> 105. Unlike the exact filter, which leaves next to nothing on ordinary
# data, this margin leaves some outputs on most programs, and a program's group recompute (loads a step
# on 1-2 warps, one column a thread) costs more than the launch it spares.
EXP_RECOMPUTE_WARPS = 4
EXP_RECOMPUTE_TILE = 1024
EXP_RECOMPUTE_MIN_CHUNK = 2048
EXP_RECOMPUTE_GROUP = 4
EXP_RECOMPUTE_GROUP_TILE = 256
EXP_RECOMPUTE_GROUP_MIN = 2
EXP_RECOMPUTE_COLUMN_TILE = 512
EXP_RECOMPUTE_COLUMN_MIN_CHUNK = 512
EXP_RECOMPUTE_COLUMN_GROUP = 32
EXP_RECOMPUTE_COLUMN_GROUP_TILE = 64
EXP_RECOMPUTE_COLUMN_GROUP_MIN = 8
# Short columns (column_group): a lane for each EXP_RECOMPUTE_COLUMN_CHAIN elements of a column, and
# groups of as many columns as make EXP_RECOMPUTE_COLUMN_SHORT_TILE elements a tile -- [512 columns, 1
# lane] for 16 rows, [128, 4] for 64, [32, 16] for 256; longer columns took [16, 32] / [16, 64] as
# before (now [32, 32] / [32, 64], below). The groups of 16 had a short column's few elements spread
# over lanes (a lane tree of 16 fp64 sums a group of 256 elements) and left dense short columns slower
# than torch. H100, 2026-12-07,
# bench/probe_accurate_columns.py --dtype bfloat16 --dim 0 --shapes 16x262144,32x131072,64x65536,
# 128x65536,256x32768,512x16384,1024x65536, GB/s, dense (log-probabilities: every column recomputed),
# the groups of 16 before -> this rule: 118 -> 363 (0.77x -> 2.39x torch), 136 -> 289, 151 -> 239, 242
# -> 325, 279 -> 296, 284 -> 297, 476 -> 477; ordinary data within the runs' spread (public 493 / 419 /
# 377 / 681 / 576 / 572 / 1677 -> 494 / 423 / 383 / 693 / 579 / 609 / 1679). Tiles of 1024: 322 / 245 /
# 190 / 325 / 314 / 333; a lane for each 8 elements: 288 / 236 / 220 / 294 / 293 / 284. Before it
# (same probe, same day) [16, 64] -> groups of 32 columns (quarter 8): dense 16x262144 / 64x65536 /
# 1024x65536 / 8192^2 / 65536x1024 118 / 151 / 477 / 453 / 388 -> 132 / 165 / 500 / 516 / 415 (two runs
# alike), ordinary within 1-2%; of 64 and 128 columns slower (113 / 103 / 302 / 299 / 285 and 78 / 42 /
# 139 / 135 / 123); [128, 1] / [512, 1] / [128, 4] / [256, 2] for every length: 231 / 160 / 241 / 239 /
# 181, 359 / 148 / 341 / 321 / 147, 196 / 241 / 489 / 458 / 288, 282 / 203 / 542 / 512 / 318 -- short
# columns want few lanes, long ones many. Groups of 32 columns (a quarter, 8, uncertified takes one
# whole) for columns longer than 256 -- [32, 32] / [32, 64] tiles where [16, 32] / [16, 64] were --
# since a second H100 run (2026-12-07, probe_accurate_columns.py --dtype bfloat16 --dim 0, groups of 16
# -> 32 in one call, GB/s): dense 1024x65536 481 -> 503, 8192^2 457 -> 519, 65536x1024 388 -> 418,
# 262144x256 420 -> 435 (+4-14%, as the first run's +5-14%); ordinary data 1673 / 1730 / 1720 / 1924 ->
# 1663 / 1731 / 1686 / 1904, within the runs' spread. A third run with this rule (groups of 16 -> 32,
# one call): dense 512x16384 307 -> 330, 1024x65536 475 -> 501, 8192^2 455 -> 517, 65536x1024 386 ->
# 415, 262144x256 419 -> 434; ordinary 588 / 1669 / 1746 / 1693 / 1890 -> 583 / 1712 / 1732 / 1688 /
# 1950. Not yet measured on an H200.
EXP_RECOMPUTE_COLUMN_CHAIN = 16
EXP_RECOMPUTE_COLUMN_SHORT_TILE = 512
EXP_RECOMPUTE_MAX_CHUNKS = 256
# One pass against the filter's maximum: the filters leave each uncertified output's row maximum in
# the output (exact: an input value, in the input's format), so the recompute reads its rows once,
# one fp64 exponential an element against it, and the chunks' sums merge without exponentials --
# where the maximum-first chunks above read each chunk twice (its maximum in fp64, then the terms).
# And ptxas's register cap EXP_RECOMPUTE_MAX_REGISTERS: the most that lets the grid's
# EXP_RECOMPUTE_PROGRAMS_PER_SM programs of EXP_RECOMPUTE_WARPS warps reside on an SM (one pass
# took fp32 rows of 65536 to 162 registers, 3 programs; sm_90 via bench/kernel_resources.py: capped,
# 97-128 on every DESIGN.md shape, bf16 262144 x 256 over dim 0 with 36 bytes spilled). H200,
# 2026-12-04, bench/probe_accurate_columns.py, GB/s, dense (log-probabilities: every output
# recomputed), maximum first -> one pass -> one pass capped at 128, shapes 1024x65536 / 8192^2 /
# 65536x1024 / 262144x256 / 16x262144: fp32 rows (the `accurate` rows' recompute) 770 / 723 / 700 /
# 573 / 447 -> 767 / 1084 / 1018 / 697 / 547 -> 966 / 1009 / 1021 / 725 / 526 (the fp64 mode 1516-2250,
# torch 274-558); bf16 rows 517 / 525 / 439 / 397 / 248 -> 626 / 662 / 544 / 413 / 314 -> 573 / 639 /
# 619 / 502 / 318; bf16 over dim 0 366 / 367 / 220 / 219 / 109 -> 469 / 469 / 402 / 316 / 117 -> 459 /
# 445 / 403 / 429 / 117. Ordinary (randn) data within 1-2% either way (the flags read, nothing to do).
# A cap of 96 (spills of 20-24 bytes): fp32 rows 893 / 939 / 928 / 735 / 481, bf16 527 / 543 / 572 /
# 493 / 281. (The maximum pass alone in fp32 instead of fp64, before the one pass: fp32 rows 916 /
# 869 / 916 / 682 / 506, bf16 547 / 516 / 464 / 418 / 323.) A second run, capped -> not: fp32 rows
# 1024x65536 / 8192^2 / 262144x256 962 / 1003 / 722 -> 749 / 1078 / 694, bf16 570 / 635 / 500 -> 624 /
# 658 / 413: the cap costs 4-9% where ptxas stayed near 128 uncapped, and gains 4-28% elsewhere.
# With the one pass, two constants moved (same probe, two runs each, default -> moved; randn within
# the runs' spread): EXP_RECOMPUTE_MIN_CHUNK 4096 -> 2048 (more, shorter chunks of the long rows):
# dense fp32 rows 1024x65536 959 / 967 -> 985 / 990, 16x262144 522 / 526 -> 588 / 590, bf16 573 / 316
# -> 597 / 342, scattered fp32 2716 / 761 -> 2774 / 799 (at the maximum-first chunks it had lost: 919
# -> 791); EXP_RECOMPUTE_COLUMN_GROUP_TILE 32 -> 64 (tiles of [16 columns, 64 rows], 52-92 bytes
# spilled on 65536x1024 and 262144x256): dense bf16 over dim 0 1024x65536 / 8192^2 / 65536x1024 /
# 262144x256 455-459 / 441-445 / 400-403 / 428-431 -> 515-516 / 479-482 / 409-412 / 442-445, 16x262144
# 117-120 either way (at the maximum-first chunks 64 had lost on 8192^2: 255 -> 230). Measured, not
# kept: EXP_RECOMPUTE_MAX_CHUNKS 512 (dense bf16 262144x256 over dim 0 428 -> 273), contiguous group
# tiles of 512 (dense fp32 rows 926 / 983 / 922 against 959 / 1005 / 1015), programs per SM 8 / 16
# (more programs: dense +5-30%, but ordinary data 1.5-7% slower -- each reads its flags and stops).
EXP_RECOMPUTE_MAX_REGISTERS = 65536 // (EXP_RECOMPUTE_PROGRAMS_PER_SM * EXP_RECOMPUTE_WARPS * 32)


@dataclass(frozen=True)
class ExpRecomputePlan:
    block_outputs: int   # outputs per program, a power of two
    block_r: int         # lanes of a lone row's tile, a power of two
    red: int             # the row length
    num_warps: int
    chunk: int = 0       # elements per chunk, a multiple of block_r and group_r (0: the whole row)
    chunks: int = 1      # programs per row
    group: int = 1       # rows of a group (adjacent outputs), a power of two dividing block_outputs; 1: none
    group_r: int = 1     # lanes of a group's tile, a power of two
    group_min: int = 2   # uncertified rows of a group from which it is recomputed whole

    @property
    def span(self) -> int:
        """Elements of a row one program reduces: a chunk, or the whole row."""
        return self.chunk if self.chunks > 1 else self.red

    @property
    def one_tile(self) -> bool:
        """Whether a lone row's span is a single tile (no loop)."""
        return self.span <= self.block_r

    @property
    def group_one_tile(self) -> bool:
        """Whether a group's span is a single tile."""
        return self.span <= self.group_r

    @property
    def block_chunks(self) -> int:
        """The lanes of the chunks' merge tree: a power of two >= chunks (1 for unchunked rows)."""
        return 1 << (self.chunks - 1).bit_length()

    @property
    def depth(self) -> int:
        """Additions a term goes through (Pass.depth's count), the larger of a lone row's and a
        group's: its lane's chain over the span's tiles (the first is with 0, exact), the lane tree,
        then the chunks' tree."""
        return max(self._depth(self.block_r), self._depth(self.group_r) if self.group > 1 else 0)

    def _depth(self, lanes: int) -> int:
        tiles = -(-self.span // lanes)
        return (tiles - 1) + (lanes.bit_length() - 1) + (self.block_chunks.bit_length() - 1)


def plan_exp_recompute(n_out: int, red: int, *, sm_count: int, strided: bool) -> ExpRecomputePlan:
    """The plan under this module's EXP_RECOMPUTE_* constants at the time of the call (tests lower
    them to split small rows into many chunks of several tiles) for rows along a contiguous axis
    (EXP_RECOMPUTE_*) or, `strided`, along a strided one (EXP_RECOMPUTE_COLUMN_*), each with its groups
    of adjacent rows."""
    if strided:
        group, group_tile, group_min = column_group(red)
        return _plan_exp_recompute(n_out, red, sm_count, EXP_RECOMPUTE_COLUMN_MIN_CHUNK, EXP_RECOMPUTE_COLUMN_TILE,
                                   group, group_tile, group_min)
    return _plan_exp_recompute(n_out, red, sm_count, EXP_RECOMPUTE_MIN_CHUNK, EXP_RECOMPUTE_TILE, EXP_RECOMPUTE_GROUP,
                               EXP_RECOMPUTE_GROUP_TILE, EXP_RECOMPUTE_GROUP_MIN)


def column_group(red: int) -> tuple:
    """(columns, lanes, minimum) of the recompute's groups of strided rows (columns) of length red: a
    column's lanes are one per EXP_RECOMPUTE_COLUMN_CHAIN of its elements, at most
    EXP_RECOMPUTE_COLUMN_GROUP_TILE, and a group holds as many columns as make
    EXP_RECOMPUTE_COLUMN_SHORT_TILE elements a tile, at least EXP_RECOMPUTE_COLUMN_GROUP; a quarter of
    them uncertified takes the group whole (EXP_RECOMPUTE_COLUMN_GROUP_MIN of EXP_RECOMPUTE_COLUMN_GROUP)."""
    lanes = min(EXP_RECOMPUTE_COLUMN_GROUP_TILE, max(1, _pow2_at_least(red) // EXP_RECOMPUTE_COLUMN_CHAIN))
    columns = max(EXP_RECOMPUTE_COLUMN_GROUP, EXP_RECOMPUTE_COLUMN_SHORT_TILE // lanes)
    return columns, lanes, max(1, columns * EXP_RECOMPUTE_COLUMN_GROUP_MIN // EXP_RECOMPUTE_COLUMN_GROUP)


@lru_cache(maxsize=4096)
def _plan_exp_recompute(n_out: int, red: int, sm_count: int, min_chunk: int, tile: int, group: int,
                        group_tile: int, group_min: int) -> ExpRecomputePlan:
    block_r = min(tile, _pow2_at_least(red))
    group_r = min(group_tile, _pow2_at_least(red)) if group > 1 else 1   # 1: no groups
    step = max(block_r, group_r)   # chunks are a whole number of either tile
    chunks = min(EXP_RECOMPUTE_MAX_CHUNKS, -(-red // min_chunk))
    chunk = -(-(-(-red // chunks)) // step) * step
    chunks = -(-red // chunk)
    block_outputs = max(group, _recompute_block_outputs(n_out, chunks, EXP_RECOMPUTE_PROGRAMS_PER_SM * sm_count))
    if chunks == 1:
        return ExpRecomputePlan(block_outputs, block_r, red, EXP_RECOMPUTE_WARPS, group=group, group_r=group_r,
                                group_min=group_min)
    return ExpRecomputePlan(block_outputs, block_r, red, EXP_RECOMPUTE_WARPS, chunk, chunks, group, group_r, group_min)
