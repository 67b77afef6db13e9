"""The fixed trees of precred/schedules/tree.py compute the order their docstrings state, bit for bit,
on the device and under the interpreter."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from precred.schedules.tree import tree_sum_blocked_rows


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


def _blocked_order_sum(row: np.ndarray, vec: int, threads: int) -> np.float32:
    """The documented order: j = (r * across + t) * vector + e; adjacent e, then adjacent r, then
    adjacent t."""
    width = row.size
    vector = min(vec, width)
    across = min(threads, width // vector)
    v = row.astype(np.float32).reshape(width // vector, vector).T      # [e, r * across + t]
    while v.shape[0] > 1:
        v = _pairs(v)
    v = v.reshape(width // (vector * across), across)                  # [r, t]
    while v.shape[0] > 1:
        v = _pairs(v)
    v = v.reshape(across)
    while v.size > 1:
        v = _pairs(v)
    return v[0]


def _adjacent_pairs_sum(row: np.ndarray) -> np.float32:
    v = row.astype(np.float32)
    while v.size > 1:
        v = _pairs(v)
    return v[0]


@pytest.mark.parametrize("rows,width,vec,threads", [(1, 8192, 4, 256), (2, 1024, 8, 128), (16, 256, 4, 128),
                                                     (4, 8, 4, 64), (2, 1, 4, 32), (1, 4096, 8, 128)])
def test_blocked_rows_tree_is_the_documented_order(device, rows, width, vec, threads):
    rng = np.random.default_rng(width + vec)
    # Magnitudes over 2^-20 .. 2^20, both signs: most reorderings change the rounded sum.
    x = (rng.standard_normal((rows, width)) * np.exp2(rng.integers(-20, 21, (rows, width)))).astype(np.float32)
    out = torch.empty(rows, dtype=torch.float32, device=device)
    _blocked_rows_kernel[(1,)](torch.from_numpy(x).to(device), out, ROWS=rows, WIDTH=width, VEC=vec, THREADS=threads)
    expected = np.array([_blocked_order_sum(r, vec, threads) for r in x], dtype=np.float32)
    assert np.array_equal(out.cpu().numpy().view(np.int32), expected.view(np.int32))
    if width // (min(vec, width) * min(threads, width // min(vec, width))) > 1:
        # where the layout repeats, the order differs from the plain adjacent-pairs tree: the test sees it
        assert any(_adjacent_pairs_sum(r) != e for r, e in zip(x, expected))
