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

    @property
    def tiles_per_lane(self) -> int:
        """Longest chain of sequential updates a lane performs in this pass."""
        return -(-min(self.chunk, self.red) // self.lanes)

    @property
    def depth(self) -> int:
        """Roundings an element can go through in this pass: its lane's chain (the first update adds to
        the exact identity 0), then log2(lanes) levels of the fixed tree."""
        return (self.tiles_per_lane - 1) + (self.lanes.bit_length() - 1)


@dataclass(frozen=True)
class Plan:
    passes: tuple

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


# Bytes of one loaded tile: 16 KiB per iteration keeps enough loads in flight per program.
TILE_BYTES = 16384
# Lanes are narrowed until each runs a chain of at least this many tiles (when the row allows): the
# final lane tree then costs little next to the streaming, while rows still load in 128-byte runs.
MIN_TILES_PER_LANE = 8
MIN_LANES = 32
# Split a long reduction when fewer than two programs per SM would otherwise run, into enough parts
# for this many per SM...
PROGRAMS_PER_SM = 4
# ...and the input is at least this large: below it a second launch costs more than it saves.
SPLIT_MIN_BYTES = 4 << 20


def _warps(tile_elements: int) -> int:
    return 8 if tile_elements >= 4096 else 4 if tile_elements >= 1024 else 2 if tile_elements >= 256 else 1


def _narrow_lanes(lanes: int, red: int, one_tile_per_lane: bool, floor: int) -> int:
    """Halve the lanes until each runs MIN_TILES_PER_LANE tiles (not below `floor`); pairwise keeps
    one tile per lane, its whole-tree order."""
    if not one_tile_per_lane:
        while lanes > floor and red < MIN_TILES_PER_LANE * lanes:
            lanes //= 2
    return lanes


def _chunk_and_parts(red, lanes, parts_wanted, one_tile_per_lane):
    if one_tile_per_lane:
        chunk = lanes
    else:
        chunk = -(-red // parts_wanted)
        chunk = -(-chunk // lanes) * lanes
    return chunk, -(-red // chunk)


def _inner_pass(outer, red, inner, parts_wanted, one_tile_per_lane, tile_elements, block_limit):
    rows = outer * inner
    lanes = _narrow_lanes(min(_pow2_at_least(red), tile_elements), red, one_tile_per_lane, MIN_LANES)
    block_rows = max(1, min(_pow2_at_least(rows), tile_elements // lanes, block_limit))
    chunk, parts = _chunk_and_parts(red, lanes, parts_wanted, one_tile_per_lane)
    return Pass("inner", outer, red, inner, lanes, block_rows, chunk, parts, _warps(lanes * block_rows))


def _outer_pass(outer, red, inner, parts_wanted, one_tile_per_lane, tile_elements, block_limit):
    # At most tile/128 lanes, so that a tile row spans 128 columns: 512 bytes of fp32 in one coalesced run;
    # at least 2, so that a one-tile-per-lane pass always shrinks the reduced axis.
    lanes = min(_pow2_at_least(red), max(2, tile_elements // 128))
    lanes = _narrow_lanes(lanes, red, one_tile_per_lane, 1)
    block_inner = max(1, min(_pow2_at_least(inner), tile_elements // lanes, block_limit))
    chunk, parts = _chunk_and_parts(red, lanes, parts_wanted, one_tile_per_lane)
    return Pass("outer", outer, red, inner, lanes, block_inner, chunk, parts, _warps(lanes * block_inner))


def _programs(p: Pass) -> int:
    per_part = p.outer * p.inner
    return -(-per_part // p.block_kept) if p.schedule == "inner" else p.outer * -(-p.inner // p.block_kept)


@lru_cache(maxsize=4096)
def plan_reduction(outer: int, red: int, inner: int, *, inner_contiguous: bool, one_tile_per_lane: bool,
                   sm_count: int, element_size: int = 4, tile_elements: int | None = None,
                   split_min_bytes: int = SPLIT_MIN_BYTES, heavy_state: bool = False) -> Plan:
    """Plan the reduction of an (outer, red, inner) view; red >= 1, outer * inner >= 1.

    inner_contiguous: the kept inner axis has unit stride (then, with inner > 1, the outer schedule
    loads coalesced tiles along it). one_tile_per_lane: the `pairwise` mode's whole-tree order.
    element_size: bytes per input element (sets the tile; tile_elements overrides it, for tests).
    split_min_bytes: smallest input that may be split (tests lower it to cover the split on small inputs).
    heavy_state: the accumulator is compensated -- twice the registers and 7 flops per element; those
    kernels measured faster with half the tile and half the warps (bench/sweep_plan.py, H100; the fp64
    accumulator measured slower that way, so it keeps the default).
    """
    first_tile = tile_elements or (TILE_BYTES // (2 if heavy_state else 1)) // element_size
    # Later passes read partial states (fp32/fp64, one or two arrays): a fixed, smaller tile.
    state_tile = tile_elements or TILE_BYTES // 4
    if red < 1 or outer * inner < 1:
        raise ValueError("plan_reduction needs a non-empty reduction")
    make = _outer_pass if (inner > 1 and inner_contiguous) else _inner_pass
    target = PROGRAMS_PER_SM * sm_count

    # First pass. Too few programs to fill the GPU: first give each program fewer outputs (down to one
    # row, or 128 columns), then -- for inputs large enough to repay a second launch -- split the
    # reduced axis across programs.
    block_limit = 1 << 30
    single = make(outer, red, inner, 1, one_tile_per_lane, first_tile, block_limit)
    floor = 1 if single.schedule == "inner" else 128
    while _programs(single) < 2 * sm_count and single.block_kept > floor:
        block_limit = single.block_kept // 2
        single = make(outer, red, inner, 1, one_tile_per_lane, first_tile, block_limit)
    parts_wanted = 1
    input_bytes = outer * red * inner * element_size
    if (not one_tile_per_lane and _programs(single) < 2 * sm_count and red > 4 * single.lanes
            and input_bytes >= split_min_bytes):
        parts_wanted = min(-(-target // _programs(single)), -(-red // single.lanes))
    passes = [make(outer, red, inner, parts_wanted, one_tile_per_lane, first_tile, block_limit)]
    if heavy_state:
        passes[0] = replace(passes[0], num_warps=max(1, passes[0].num_warps // 2))

    # Later passes merge the partial states. Inner passes leave them as [rows, parts] (contiguous
    # along parts: an inner pass again); outer passes as [parts, outer*inner] (an outer pass again).
    while passes[-1].parts > 1:
        prev = passes[-1]
        if prev.schedule == "inner":
            nxt = _inner_pass(prev.outer * prev.inner, prev.parts, 1, 1, one_tile_per_lane, state_tile, 1 << 30)
        else:
            nxt = _outer_pass(1, prev.parts, prev.outer * prev.inner, 1, one_tile_per_lane, state_tile, 1 << 30)
        if nxt.parts > 1 and nxt.parts >= prev.parts:
            raise AssertionError(f"plan_reduction made no progress: {prev} -> {nxt}")
        passes.append(nxt)
    return Plan(tuple(passes))
