"""The fixed trees of precred/schedules/tree.py compute the order their docstrings state, bit for bit,
on the device and under the interpreter."""
import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from precred.plan import PLAIN_HALVES_MIN_LANES
from precred.schedules.tree import tree_sum_blocked_rows, tree_sum_halves


@triton.jit
def _blocked_rows_kernel(x_ptr, out_ptr, ROWS: tl.constexpr, WIDTH: tl.constexpr, VEC: tl.constexpr,
                         THREADS: tl.constexpr):
    rows = tl.arange(0, ROWS)
    cols = tl.arange(0, WIDTH)
    x = tl.load(x_ptr + rows[:, None] * WIDTH + cols[None, :])
    tl.store(out_ptr + rows, tree_sum_blocked_rows(x, ROWS, WIDTH, VEC, THREADS))


def _pairs(v):
    """One tree level over the first axis: adjacent pairs, in fp32."""
    return v[0::2] + v[1::2]


def _blocked_order_sum(row: np.ndarray, vec: int, threads: int, warp_halves: bool = True) -> np.float32:
    """The documented order: j = (r * across + t) * vector + e, t = 32 * w + lane; adjacent e, then
    adjacent r, then adjacent lanes, then the warps' sums in halves (w with w + warps / 2)."""
    width = row.size
    vector = min(vec, width)
    across = min(threads, width // vector)
    v = row.astype(np.float32).reshape(width // vector, vector).T      # [e, r * across + t]
    while v.shape[0] > 1:
        v = _pairs(v)
    v = v.reshape(width // (vector * across), across)                  # [r, t]
    while v.shape[0] > 1:
        v = _pairs(v)
    lanes = min(across, 32)
    v = v.reshape(across // lanes, lanes).T                             # [lane, warp]
    while v.shape[0] > 1:
        v = _pairs(v)
    v = v.reshape(-1)                                                   # the warps' sums
    while v.size > 1:
        # halves: w and w + warps / 2 (warp_halves=False: adjacent warps, the order this tree had before)
        v = v[: v.size // 2] + v[v.size // 2:] if warp_halves else _pairs(v)
    return v[0]


def _adjacent_pairs_sum(row: np.ndarray, dtype=np.float32):
    v = row.astype(dtype)
    while v.size > 1:
        v = _pairs(v)
    return v[0]


@pytest.mark.parametrize("rows,width,vec,threads", [(1, 8192, 4, 256), (2, 1024, 8, 128), (16, 256, 4, 128),
                                                     (4, 8, 4, 64), (2, 1, 4, 32), (1, 4096, 8, 128),
                                                     (1, 8192, 4, 512), (1, 16384, 8, 1024), (4, 1024, 4, 256),
                                                     (8, 4096, 8, 512)])
def test_blocked_rows_tree_is_the_documented_order(device, rows, width, vec, threads):
    rng = np.random.default_rng(width + vec)
    # Magnitudes over 2^-20 .. 2^20, both signs: most reorderings change the rounded sum.
    x = (rng.standard_normal((rows, width)) * np.exp2(rng.integers(-20, 21, (rows, width)))).astype(np.float32)
    out = torch.empty(rows, dtype=torch.float32, device=device)
    # THREADS = 32 * num_warps, as every launcher passes it (the warps' order is Triton's reduction's)
    _blocked_rows_kernel[(1,)](torch.from_numpy(x).to(device), out, ROWS=rows, WIDTH=width, VEC=vec, THREADS=threads,
                               num_warps=threads // 32)
    expected = np.array([_blocked_order_sum(r, vec, threads) for r in x], dtype=np.float32)
    assert np.array_equal(out.cpu().numpy().view(np.int32), expected.view(np.int32))
    if width // (min(vec, width) * min(threads, width // min(vec, width))) > 1:
        # where the layout repeats, the order differs from the plain adjacent-pairs tree: the test sees it
        assert any(_adjacent_pairs_sum(r) != e for r, e in zip(x, expected))
    if min(threads, width // min(vec, width)) >= 4 * 32 and rows >= 4:
        # where rows span four warps or more, halves and adjacent warps differ: the test sees that too
        assert any(_blocked_order_sum(r, vec, threads, warp_halves=False) != e for r, e in zip(x, expected))


@triton.jit
def _halves_kernel(x_ptr, out_ptr, ROWS: tl.constexpr, WIDTH: tl.constexpr, VEC: tl.constexpr):
    rows = tl.arange(0, ROWS)
    cols = tl.arange(0, WIDTH)
    x = tl.load(x_ptr + rows[:, None] * WIDTH + cols[None, :])
    tl.store(out_ptr + rows, tree_sum_halves(x, ROWS, WIDTH, VEC))


def _halves_order_sum(row: np.ndarray, vec: int, dtype=np.float32):
    """tree_sum_halves' documented order: adjacent pairs within each vector of `vec` elements, then the
    vectors' sums q in halves (q with q + Q/2), in `dtype` (the accumulator) -- no thread count in it."""
    vector = min(vec, row.size)
    v = row.astype(dtype).reshape(row.size // vector, vector).T           # [e, q]
    while v.shape[0] > 1:
        v = _pairs(v)
    v = v.reshape(-1)
    while v.size > 1:
        v = v[: v.size // 2] + v[v.size // 2:]
    return v[0]


@pytest.mark.parametrize("rows,width,vec", [(1, 8192, 4), (1, 16384, 8), (1, 4096, 4), (2, 1024, 8), (4, 1024, 4),
                                            (16, 256, 4), (4, 8, 4), (2, 1, 4), (1, 256, 4)])
def test_halves_tree_is_the_documented_order_on_any_warps(device, rows, width, vec):
    """tree_sum_halves gives the bits of its written-out order on 1 to 32 warps -- fewer threads than
    vectors (repeats in registers), as many, more (replicated) -- so a plan's warps never change them;
    also from a start that is not 16-byte aligned (another layout: Triton cannot load vectors)."""
    rng = np.random.default_rng(width * 3 + vec + rows)
    x = (rng.standard_normal((rows, width)) * np.exp2(rng.integers(-20, 21, (rows, width)))).astype(np.float32)
    expected = np.array([_halves_order_sum(r, vec) for r in x], dtype=np.float32)
    buffer = torch.zeros(x.size + 1, dtype=torch.float32, device=device)
    for offset in (0, 1):
        src = buffer[offset:]
        src[:x.size] = torch.from_numpy(x.reshape(-1)).to(device)
        for warps in ((1, 2, 4, 8, 16, 32) if device != "cpu" else (1, 8))[:None if offset == 0 else 3]:
            out = torch.empty(rows, dtype=torch.float32, device=device)
            _halves_kernel[(1,)](src, out, ROWS=rows, WIDTH=width, VEC=vec, num_warps=warps)
            assert np.array_equal(out.cpu().numpy().view(np.int32), expected.view(np.int32)), (warps, offset)
    if width // min(vec, width) >= 4:
        # the halves differ from adjacent pairs here: the test sees the order
        assert any(_adjacent_pairs_sum(r) != e for r, e in zip(x, expected))


@pytest.mark.parametrize("mode,dtype", [("fast", torch.float32), ("fp64", torch.float32), ("fast", torch.bfloat16)])
def test_plain_lanes_take_the_halves_tree(device, mode, dtype):
    """precred.sum's plain passes of PLAIN_HALVES_MIN_LANES lanes or more merge their lanes in
    tree_sum_halves' order (each lane chains its elements j, j + lanes, ... first): the kernel's bits
    are those of the order written out, on the planner's warps and on others. The output is the
    accumulator's dtype, so that no final rounding hides the order (the data tells it from adjacent pairs)."""
    from dataclasses import replace

    from precred.launch import Output, plan_for, reduce
    from precred.modes import get_mode

    rng = np.random.default_rng(PLAIN_HALVES_MIN_LANES)
    n = 8 * PLAIN_HALVES_MIN_LANES
    x = torch.from_numpy(rng.standard_normal((3, n)) * np.exp2(rng.integers(-20, 21, (3, n)))).to(dtype)
    m = get_mode(mode)
    _, plan = plan_for(x.to(device), (1,), m, sm_count=132)
    (first,) = plan.passes
    assert first.lanes >= PLAIN_HALVES_MIN_LANES and first.tiles_per_lane > 1, plan
    acc = np.float64 if mode == "fp64" else np.float32
    values = x.double().numpy().astype(acc).reshape(3, n // first.lanes, first.lanes)
    lanes = values[:, 0]
    for t in range(1, n // first.lanes):   # each lane's chain, tile after tile
        lanes = lanes + values[:, t]
    vec = 16 // x.element_size()
    halves = [_halves_order_sum(row, vec, acc) for row in lanes]
    assert any(h != _adjacent_pairs_sum(row, acc) for h, row in zip(halves, lanes))
    out_dtype = torch.float64 if acc == np.float64 else torch.float32
    want = torch.tensor(np.array(halves, dtype=acc))
    for warps in (first.num_warps, 1, 16):
        narrower = replace(plan, passes=(replace(first, num_warps=warps),))
        got, _ = reduce(x.to(device), (1,), m, out_dtype, Output(), narrower)
        assert torch.equal(got.cpu(), want), warps


def _counter_sum(values: list) -> np.ndarray:
    """schedules/tree.py's binary counter over values[0], values[1], ... (fp32 arrays, elementwise): the
    push carries a value up through the levels whose bit of g is set, the total sweeps the parked levels
    of the set bits of n, lowest first, from 0."""
    levels = [None] * 8
    for g, v in enumerate(values):
        carry = v
        for k in range(8):
            if (g >> k) & 1:
                carry = levels[k] + carry
            else:
                levels[k] = carry
                break
    total = np.zeros_like(values[0])
    for k in range(8):
        if (len(values) >> k) & 1:
            total = levels[k] + total
    return total


def _pairwise_counter_part(part: np.ndarray, lanes: int, vec: int, threads: int) -> np.float32:
    """A pairwise part as the inner schedule's TILE_COUNTER sums it: each tile of `lanes` (zero-padded)
    summed within each thread (the blocked tree's levels over e, then r), the threads' shares over the
    tiles by the binary counter, then the threads' totals by adjacent pairs."""
    vector = min(vec, lanes)
    across = min(threads, lanes // vector)
    tiles = -(-part.size // lanes)
    padded = np.zeros(tiles * lanes, dtype=np.float32)
    padded[:part.size] = part
    shares = []
    for g in range(tiles):
        v = padded[g * lanes:(g + 1) * lanes].reshape(lanes // vector, vector).T     # [e, r * across + t]
        while v.shape[0] > 1:
            v = _pairs(v)
        v = v.reshape(lanes // (vector * across), across)                           # [r, t]
        while v.shape[0] > 1:
            v = _pairs(v)
        shares.append(v.reshape(across))
    v = _counter_sum(shares)
    while v.size > 1:
        v = _pairs(v)
    return v[0]


@pytest.mark.parametrize("n,sm_count", [(700, 1), (5000, 4)])   # one part; five, merged
def test_pairwise_rows_take_the_documented_order(device, n, sm_count):
    """precred.sum(mode="pairwise") over rows whose parts hold several tiles: the kernel's bits are those
    of the documented tree (_pairwise_counter_part per part, the parts then by the merging pass's
    adjacent pairs), so the depth the bound assumes, ceil(log2 n), is the depth that ran."""
    from dataclasses import replace

    from precred.launch import Output, plan_for, reduce
    from precred.modes import get_mode

    rng = np.random.default_rng(n)
    x = (rng.standard_normal((3, n)) * np.exp2(rng.integers(-20, 21, (3, n)))).astype(np.float32)
    xt = torch.from_numpy(x).to(device)
    mode = get_mode("pairwise")
    _, plan = plan_for(xt, (1,), mode, tile_elements=64, sm_count=sm_count, split_min_bytes=0)
    first = plan.passes[0]
    assert first.tile_counter and first.tiles_per_lane > 1, plan
    got, _ = reduce(xt, (1,), mode, torch.float32, Output(), plan)
    expected = []
    for row in x:
        parts = np.array([_pairwise_counter_part(row[p * first.chunk:(p + 1) * first.chunk], first.lanes, 4,
                                                 32 * first.num_warps) for p in range(first.parts)], np.float32)
        if first.parts > 1:   # the merge: one tile of the second pass's lanes, zero-padded, adjacent pairs
            merge = plan.passes[1]   # (tree_sum_halves' order over fp32 states' vectors from PLAIN_HALVES_MIN_LANES)
            assert len(plan.passes) == 2 and not merge.tile_counter and merge.lanes >= first.parts, plan
            padded = np.concatenate([parts, np.zeros(merge.lanes - first.parts, np.float32)])
            halves = 0 < PLAIN_HALVES_MIN_LANES <= merge.lanes
            parts = _halves_order_sum(padded, 4) if halves else _adjacent_pairs_sum(padded)
        expected.append(np.float32(parts if first.parts > 1 else parts[0]))
    expected = np.array(expected, dtype=np.float32)
    assert np.array_equal(got.cpu().numpy().view(np.int32), expected.view(np.int32)), (got, expected)
    assert plan.depth == math.ceil(math.log2(n))
    unfused = reduce(xt, (1,), mode, torch.float32, Output(), replace(plan, fused_merge=False))[0]
    assert torch.equal(unfused.view(torch.int32), got.view(torch.int32))
