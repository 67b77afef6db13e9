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
