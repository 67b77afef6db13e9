"""Programs of a two-dimensional tiling: (row block, column block).

CUDA caps a grid's second and third dimensions at 65535 programs (the first at 2^31 - 1); the
interpreter has no such cap, so a (row blocks, column blocks) grid that passes every CPU test can fail
to launch on the GPU: a softmax over 2^26 contiguous elements has 131072 column blocks, one over dim 0
of a (10^6, 16) matrix 125000. The kernels whose second tiling axis can grow that long -- softmax's
normalizing pass (normalize.py), log_softmax's split tail (split_tail.py: parts of a row), the norms'
streamed apply pass (norm_stream.py) -- take FLAT_GRID there (precred.launch.two_axis_grid): one grid
dimension of (row blocks x column blocks) programs, the pair recovered here, row blocks fastest -- the
order blockIdx.x runs a two-dimensional grid in. Below the cap they keep the two-dimensional grid: the
flat one's division costs registers (sm_90, softmax fast fp32 16x262144's normalizing pass: 66 -> 80).

A block's indices (block_start, block_indices) are computed in the integer type of the count they run
to: Triton types an integer argument of 2^31 or more int64, so a call of 2^31 or more rows (outputs,
columns) gets int64 indices that do not wrap, and every smaller call keeps its int32 ones (no register
more).
"""
import triton
import triton.language as tl


@triton.jit
def row_and_column_block(n_rows, BLOCK_ROWS: tl.constexpr, FLAT_GRID: tl.constexpr):
    """(row block, column block) of this program: program_id(0), program_id(1) of a two-dimensional
    grid; with FLAT_GRID, program p of a one-dimensional grid is row block p % R, column block p // R,
    R = cdiv(n_rows, BLOCK_ROWS)."""
    if FLAT_GRID:
        row_blocks = tl.cdiv(n_rows, BLOCK_ROWS)
        program = tl.program_id(0)
        return program % row_blocks, program // row_blocks
    else:
        return tl.program_id(0), tl.program_id(1)


@triton.jit
def block_start(block, size, count):
    """block * size (a block's first index) in count's integer type: int64 where count (the number of
    rows, outputs or columns the block's indices run to, a kernel argument) is 2^31 or more, as Triton
    types it; otherwise int32, block's type (an int32 count, or the constant Triton makes of a count of
    1). count * 0 carries only the type: the compiler folds it."""
    return (block + count * 0) * size


@triton.jit
def block_indices(block, BLOCK: tl.constexpr, count):
    """block * BLOCK + [0, BLOCK) in count's integer type (block_start)."""
    return block_start(block, BLOCK, count) + tl.arange(0, BLOCK)
