"""`exact` mode, first stage: fp64 accumulation with an a-posteriori error bound (a filter).

State (s, t, m), for fp32 / bf16 / fp16 inputs (each exact in fp64):
- `s` is the plain fp64 sum of everything seen;
- `t` (fp64) sums |s_k| over every addition k that formed a partial sum s_k (updates and merges alike);
- `m` keys the smallest nonzero |x| seen: its fp32 bit pattern shifted left by one (dropping the
  sign), minus 2, as uint32 -- so a zero (key 0xFFFFFFFE) never wins the minimum over a nonzero
  input, and an integer minimum on the bits replaces an fp64 compare-select-minimum (measured: that
  cost 40% of the filter's throughput). (bits << 1) - 2 is one instruction (LEA); (bits & 0x7FFFFFFF)
  - 1, the key before, took two: sm_90 SASS loops, instructions per 16 elements, fp32 rows 174 -> 160,
  columns 150 -> 134, bf16 columns 171 -> 162 (bf16 rows, 8 elements: 91 -> 90, their halves masked
  apart). Keyed on the fp64 value's high word instead, LLVM shifted the 64-bit pair (two again).

The bound. Every fp64 addition rounds to nearest, so its error is at most u64 * |its rounded result|
(the model fl(a + b) = (a + b) / (1 + d), |d| <= u64; a sum in the subnormal range is exact). The
exact sum V therefore lies within u64 * T of s, T = sum_k |s_k| exactly. t is T summed in fp64:
nonnegative terms through at most n + L + 100 additions each (a lane's chain of tiles, the lanes'
merge -- the tree, or on the GPU Triton's reduction: the L lanes a thread holds in a chain, L < 2^14,
then a level per halving across threads and warps --, the passes' merges, masked lanes included), so
T <= t * (1 + gamma_(n+L+100)) <= t * (1 + 2^-14) for n <= 2^37, and E = 2^-53 * (1 + 2^-14) * t bounds |V - s|.

Exactly known. Every input is a multiple of its own ulp in its input format, which is a multiple of q
= that format's ulp of m (the ulp of a format grows with the magnitude, and a subnormal's is the
format's smallest, 2^LSB_EXP: so for |x| >= m, ulp(x) >= ulp(m), both powers of two): every partial
sum is a multiple of q, and an fp64 addition of multiples of q can only round when its result reaches
2^53 q -- which puts at least u64 * 2^53 q = q into E. So E < q / 2 means that no addition rounded: s
== V, and the filter rounds V once, ties included. (Ties are common: the exact sum of fp32 values has
few bits when the row's magnitudes are close -- 1 row in ~4000 of 1024 normal values lands on an fp32
midpoint, far more in bf16: a column of 8192 N(0, 1) bf16 values sums to a multiple of ~2^-20, an
fp32 midpoint one time in ~8 near 100. q is bf16's ulp of m there, 2^16 times fp32's, which keeps
such a column exactly known even where its m is small; with fp32's ulp of m, the q before 2026-12-08,
a column whose m fell to ~2^-20 was not, and if its sum sat on a midpoint it went to the
superaccumulator, the price of a lone uncertified column: docs/exact.md.)

Certified. Otherwise the result is certified when both ends of [s - E, s + E], widened for the fp64
roundings of the check itself, round to the same value of the output format: rounding is monotonic,
so every point between them, V included, rounds there too.

Why this state and not double-double (TwoSum's sum, errors and their magnitudes, the first design):
three cheap operations per element instead of ten, and on ordinary data its interval is far inside
half an ulp -- mean-zero rows of n normal values have T ~ n^1.5 / sqrt(lanes), ~2^-19 of an fp32 ulp
at n = 65536. What it gives up: rows of condition beyond ~1e8 that are not exactly known go to the
integer superaccumulator (strategies/superaccumulator.py, schedules/recompute.py), which is right on
every row but slower.

Partial states (a split's parts, written for the pass that merges them) keep s in fp64, t rounded up to
fp32 and m's bits in int32: 16 bytes instead of 24 (the merge pass reads them all, and the parts write
them: H200, ncu, 65536x1024 bf16 over dim 0: that merge took 15.9 us of a 59 us call, fast's 8.8).
Rounding t up only raises every later sum of it (fp64 additions are monotonic), so T <= t * (1 +
gamma) still holds and the bound stays rigorous -- at most 2^-23 looser; a t beyond fp32's range
becomes inf, whose row the filter does not certify (the superaccumulator recomputes it).

s is finite whenever every input is (no fp32 sum reaches fp64's range), so a non-finite s means an
inf or NaN input: torch's answer (inf, or NaN for inf + -inf or a NaN) is s itself, certified.

A tile's tree bounded by its largest magnitude (plan.EXACT_TILE_MAGNITUDE_BOUND; schedules/outer.py
exact_tile_part): T needs only an upper bound on each group of its terms. A balanced tree over n = 2^L
inputs of largest magnitude M forms, at each of its L levels, n / 2^j partial sums of 2^j inputs,
each at most 2^j M (1 + u64)^j in magnitude: the level's terms add up to at most n M (1 + u64)^j, the
tree's to L n M (1 + u64)^L. So the tile's lanes may be summed by the plain fp64 tree and its |s_k|
replaced by tile_tree_bound(n) * M (M the fp32 maximum of |x|, exact): one fp64 addition an element
instead of two, and a looser T (N(0, 1) data, tiles of 8 lanes: 4.3x on the tiles' terms, 2.9x
with a part's column chain of 32 tiles) -- still far inside half an ulp there, but fewer ties known
exactly (E < q / 2). The product's own rounding (2^-53) and (1 + u64)^L <= 1 + 2^-50 (L <=
6) are inside the factor's 2^-40. An inf input makes M and t inf, a NaN one may be passed over by the
maximum: s is inf or NaN then, special either way. (A maximum that flushed subnormals would still be
safe: a tile of subnormals alone adds them exactly in fp64, and any normal |x| is M itself.)
"""
import triton
import triton.language as tl


NO_MAGNITUDE = tl.constexpr(0xFFFFFFFF)   # m before any input (above a zero's key, 0xFFFFFFFE)


TILE_TREE_MAX_LANES = 64   # L <= 6: (1 + u64)^L <= 1 + 2^-50, and L * n < 2^13 (tile_tree_bound)


def tile_tree_bound(lanes: int) -> float:
    """The factor c of a tile tree's bound c * M (module docstring): L * n * (1 + 2^-40) for n = 2^L
    lanes, exact in fp64 (L * n < 2^13); 0 for one lane (no addition, nothing to bound)."""
    levels = lanes.bit_length() - 1
    if lanes != 1 << levels or not 1 <= lanes <= TILE_TREE_MAX_LANES:
        raise ValueError(f"tile_tree_bound: lanes must be a power of two from 1 to {TILE_TREE_MAX_LANES}, "
                         f"got {lanes}")
    return levels * lanes * (1 + 2.0 ** -40)


@triton.jit
def magnitude_key(x32):
    """m's key of each input, given in fp32 (every input format widens to it exactly): its bits shifted
    left by one, minus 2, as uint32, wrapping (ordered as |x| is: 0 for the smallest subnormal, at
    most 0xFFFFFFFC for a NaN; zero -> 0xFFFFFFFE)."""
    return (x32.to(tl.uint32, bitcast=True) << 1) - 2


@triton.jit
def exact_update(s, t, m, x, key):
    """x: the input in fp64; key: its magnitude_key."""
    s = s + x
    return s, t + tl.abs(s), tl.minimum(m, key)


@triton.jit
def exact_combine(s_a, t_a, m_a, s_b, t_b, m_b):
    """Symmetric: fp64 addition and the minimum commute."""
    s = s_a + s_b
    return s, (t_a + t_b) + tl.abs(s), tl.minimum(m_a, m_b)


@triton.jit
def bound_up_to_fp32(t):
    """t (fp64, >= 0, or NaN) as the smallest fp32 value >= t: rounded to nearest, then one fp32 step up
    where that fell below t (subnormals included; beyond fp32's range: inf)."""
    r = t.to(tl.float32)
    return tl.where(r.to(tl.float64) < t, (r.to(tl.uint32, bitcast=True) + 1).to(tl.float32, bitcast=True), r)


@triton.jit
def power_of_two(k):
    """2^k in fp64 for integer k in [-1022, 1023], built from its bits (exact on every device)."""
    return ((k.to(tl.int64) + 1023) << 52).to(tl.float64, bitcast=True)


@triton.jit
def round_to_format(v, P: tl.constexpr, EMIN: tl.constexpr, EMAX: tl.constexpr):
    """fp64 v correctly rounded (to nearest, ties to even) to the binary format of precision P and
    exponent range [EMIN, EMAX], subnormals included; returned as the fp64 value it rounds to (exactly
    representable there), or +-inf beyond the largest finite value. v finite, |v| < 2^1023.

    |v| / ulp is exact (ulp a power of two, the quotient < 2^P), and so is |v| * (1 / ulp), the same
    value without an fp64 division (1 / ulp = 2^(P - 1 - exponent), within [2^-1016, 2^149]: a normal
    fp64 number); (y + 2^52) - 2^52 rounds y >= 0 to an integer with ties to even (the sum lies in
    [2^52, 2^53), where the fp64 spacing is 1)."""
    a = tl.abs(v)
    exponent = ((a.to(tl.int64, bitcast=True) >> 52) - 1023).to(tl.int32)
    exponent = tl.maximum(exponent, EMIN)
    ulp = power_of_two(exponent - (P - 1))
    magic = 4503599627370496.0   # 2^52
    r = ((a * power_of_two((P - 1) - exponent) + magic) - magic) * ulp
    # Beyond the largest finite value, 2^(EMAX+1) - 2^(EMAX+1-P), rounding reached 2^(EMAX+1): inf.
    r = tl.where(r >= power_of_two(exponent * 0 + (EMAX + 1)), float("inf"), r)
    # * -1.0, not unary minus: Triton negates as 0 - r, which turns -0.0 (a tiny negative v) into +0.0.
    return tl.where(v < 0, r * -1.0, r)


@triton.jit
def round_to_output_format(v, OUT_DTYPE: tl.constexpr):
    """round_to_format for the output pointer's element type: fp32, fp16, or bf16 (its int16 bits)."""
    if OUT_DTYPE == tl.float32:
        r = round_to_format(v, 24, -126, 127)
    elif OUT_DTYPE == tl.float16:
        r = round_to_format(v, 11, -14, 15)
    else:
        r = round_to_format(v, 8, -126, 127)
    return r


@triton.jit
def exact_finish(s, t, m, n, DIVIDE: tl.constexpr, OUT_DTYPE: tl.constexpr, MAN_BITS: tl.constexpr,
                 LSB_EXP: tl.constexpr):
    """(value, certified): the sum (or, DIVIDE, the mean: sum / n) rounded to the output format as an
    fp64 value, and whether the filter proves it correctly rounded. m: the magnitude key (uint32);
    n: the element count (fp64); MAN_BITS, LSB_EXP: the input format's stored mantissa bits and
    log2 of its smallest subnormal (superaccumulator.INPUT_FORMATS)."""
    # Constants: 2^-53 (1 + 2^-14), 1 + 2^-48, 2^-49, 2^-50.
    bound = t * 1.110290787260937e-16
    # q = the input format's ulp of m (module docstring, "Exactly known"): 2^max(e - 127 - MAN_BITS,
    # LSB_EXP) for the biased fp32 exponent field e of m, the top 8 bits of m + 2 (|x|'s fp32 bits
    # shifted left by one; e = 0 for an fp32 subnormal falls to LSB_EXP in every format). fp32 input:
    # 2^(max(e, 1) - 150), its fp32 ulp. No nonzero input: m + 2 wraps to 0 or 1, q = 2^LSB_EXP, and
    # t == 0 proves s == V == 0 anyway.
    biased_exponent = ((m + 2) >> 24).to(tl.int32)
    q = power_of_two(tl.maximum(biased_exponent - (127 + MAN_BITS), LSB_EXP))
    exactly_known = bound < 0.5 * q   # then s == V (module docstring)
    bound = tl.where(exactly_known, 0.0, bound)
    # An inf or NaN input: s (or s / n) is torch's answer.
    special = (s - s) != 0.0
    if DIVIDE:
        # V / n = s / n +- E / n, and c = fl(s / n) is within u64 * |c| * (1 + 2 u64) of s / n.
        center = s / n
        margin = (bound / n) * 1.0000000000000036 + tl.abs(center) * 1.7763568394002505e-15
    else:
        # An exactly known V needs no margin: both ends are V itself, rounded once (s is never -0.0:
        # the sum starts from +0.0, so center + 0.0 == center).
        center = s
        margin = tl.where(exactly_known, 0.0, bound * 1.0000000000000036 + tl.abs(s) * 8.881784197001252e-16)
    # The margin also covers the roundings of the check itself (its own products and center -/+ margin),
    # so the fp64 ends enclose every possible V (or V / n).
    low = round_to_output_format(center - margin, OUT_DTYPE)
    high = round_to_output_format(center + margin, OUT_DTYPE)
    # Compared as bits: ends of -0.0 and +0.0 do not tell V's sign, which the zero must carry.
    certified = low.to(tl.int64, bitcast=True) == high.to(tl.int64, bitcast=True)
    return tl.where(special, center, high), certified | special
