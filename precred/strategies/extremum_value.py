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
"""
import triton
import triton.language as tl

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
