"""The extremum's value alone (amax / amin, max(x) / min(x) over every dim): state v, no index.

amax needs no index, and carrying one (strategies/extremum.py) doubles a lane's registers: on an H100
the indexed kernel of a bf16 1024 x 65536 row reduction took 238 registers per thread (one program of
8 warps per SM) against the sum's 70, and ran at 0.83x torch.amax. This strategy keeps one integer
per lane, the element's key:

    key(x) = bits(x) XOR ((bits(x) >> (w - 1)) AND (2^(w-1) - 1))    (w = 32 or 64, arithmetic shift)

maps the floats onto the signed integers in the order -inf < ... < -0.0 < +0.0 < ... < +inf, and every
NaN is given the key of the canonical quiet NaN, above +inf. The largest key is IEEE 754-2019's
`maximum` of the elements: a NaN anywhere gives NaN (torch's rule), and +0.0 beats -0.0. Integer maxima
are exact, associative and commutative, so the result is the same bits on every schedule, lane count,
part count and device -- and in the interpreter, which does the same integer arithmetic. Minima run as
maxima of -x and are negated back (strategies/extremum.oriented), so amin is IEEE's `minimum`: -0.0
beats +0.0.

Placement in the schedules' (hi, lo, cnt) state: hi = the key (int32 for an fp32 accumulator, int64
for fp64: both hold every input value exactly); lo is unused (passed through). Partial states are
stored as the floats the keys stand for (the map is its own inverse on keys) and keyed again on load.
The identity (an empty lane) is key(-inf): any element reaches it, -inf included.

Lanes of fp32 values on the GPU: in a loop over full tiles, a compiled kernel with an fp32 accumulator
keeps each lane's running maximum as a float, folded by tl.maximum(propagate_nan=ALL) -- PTX's
max.NaN.f32, one FMNMX.NAN per element, which is IEEE 754-2019's maximum (NaN if either is NaN, +0.0
above -0.0) -- and keys the lanes once, after the loop (`lanes_as_keys`). The key per element cost
seven instructions more (sm_90 SASS of a bf16 2^28 amax: mask, shift, sign extension, NaN test and
select, xor, integer max), which held the 16-bit amax of 2^28 elements at 0.73 of the copy on an H200.
The lane's maximum is the same element either way (both are IEEE's maximum; a NaN lane becomes the
canonical NaN's key), so the result keeps its bits. The interpreter keys every element: numpy's
maximum returns its first argument on -0.0 == +0.0, which would make a lane's zero depend on order.
fp64 accumulators key every element too (PTX has no max.NaN.f64).
"""
import triton
import triton.language as tl

from ..checks import KERNELS_INTERPRETED

_COMPILED = tl.constexpr(not KERNELS_INTERPRETED)

# Keys of the canonical quiet NaN (positive: its key is its bit pattern) and of -inf, by width.
NAN_KEY_32 = tl.constexpr(0x7FC00000)
NAN_KEY_64 = tl.constexpr(0x7FF8000000000000)
LOWEST_KEY_32 = tl.constexpr(-0x7F800001)           # key(-inf) = 0xFF800000 ^ 0x7FFFFFFF, as int32
LOWEST_KEY_64 = tl.constexpr(-0x7FF0000000000001)   # key(-inf) = 0xFFF0000000000000 ^ 0x7FFF..., as int64


@triton.jit
def value_key(v):
    """fp32 / fp64 values -> their int32 / int64 keys (every NaN the canonical NaN's)."""
    if v.dtype == tl.float64:
        bits = v.to(tl.int64, bitcast=True)
        key = tl.where(v != v, NAN_KEY_64, bits ^ ((bits >> 63) & 0x7FFFFFFFFFFFFFFF))
    else:
        bits = v.to(tl.int32, bitcast=True)
        key = tl.where(v != v, NAN_KEY_32, bits ^ ((bits >> 31) & 0x7FFFFFFF))
    return key


@triton.jit
def key_value(key):
    """int32 / int64 keys -> the fp32 / fp64 values they stand for (the same XOR undoes the map)."""
    if key.dtype == tl.int64:
        value = (key ^ ((key >> 63) & 0x7FFFFFFFFFFFFFFF)).to(tl.float64, bitcast=True)
    else:
        value = (key ^ ((key >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)
    return value


@triton.jit
def lowest_key(ROWS: tl.constexpr, COLS: tl.constexpr, ACC_DTYPE: tl.constexpr):
    """The identity state of a [ROWS, COLS] tile of lanes: key(-inf) in the accumulator's width."""
    if ACC_DTYPE == tl.float64:
        key = tl.full([ROWS, COLS], LOWEST_KEY_64, tl.int64)
    else:
        key = tl.full([ROWS, COLS], LOWEST_KEY_32, tl.int32)
    return key


@triton.jit
def value_max_combine(key_a, lo_a, key_b, lo_b):
    return tl.maximum(key_a, key_b), lo_a


@triton.jit
def value_lanes(ROWS: tl.constexpr, COLS: tl.constexpr, ACC_DTYPE: tl.constexpr):
    """The identity state of a [ROWS, COLS] tile of lanes folded by `fold_value_lanes`: -inf where the
    lanes hold floats (compiled, fp32), else key(-inf)."""
    if ACC_DTYPE == tl.float32 and _COMPILED:
        lanes = tl.full([ROWS, COLS], float("-inf"), tl.float32)
    else:
        lanes = lowest_key(ROWS, COLS, ACC_DTYPE)
    return lanes


@triton.jit
def fold_value_lanes(lanes, x, ACC_DTYPE: tl.constexpr):
    """Fold a full tile of oriented values x (elements, or partial states) into the lanes."""
    if ACC_DTYPE == tl.float32 and _COMPILED:
        lanes = tl.maximum(lanes, x, propagate_nan=tl.PropagateNan.ALL)
    else:
        lanes = tl.maximum(lanes, value_key(x))
    return lanes


@triton.jit
def lanes_as_keys(lanes, ACC_DTYPE: tl.constexpr):
    """The lanes after their loop, as keys (what value_tail and the tree take)."""
    if ACC_DTYPE == tl.float32 and _COMPILED:
        lanes = value_key(lanes)
    return lanes
