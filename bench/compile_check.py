"""Compile every kernel variant for sm_90 on a machine without a GPU (Triton ships ptxas).

Catches Triton front-end and lowering errors before device time is spent:
    TRITON_INTERPRET=0 python bench/compile_check.py [--strategies 4,5,6]
"""
import inspect
import itertools
import os
import sys
import time

os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from precred import plan  # noqa: E402
from precred.schedules.atomic import atomic_extremum_kernel, atomic_finish_kernel  # noqa: E402
from precred.schedules.inner import inner_kernel  # noqa: E402
from precred.schedules.normalize import normalize_kernel  # noqa: E402
from precred.schedules.outer import outer_kernel  # noqa: E402
from precred.schedules.recompute import exp_recompute_kernel  # noqa: E402
from precred.schedules.row_loop import row_loop_kernel  # noqa: E402
from precred.schedules.single_read import single_read_kernel  # noqa: E402
from precred.schedules.split_tail import split_tail_kernel  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)


def constexpr_defaults(kernel) -> dict:
    """The default values of a kernel's constexpr parameters (upper-case names) that have one."""
    parameters = inspect.signature(kernel.fn).parameters
    return {name: p.default for name, p in parameters.items() if name.isupper() and p.default is not p.empty}


def compile_variant(kernel, blocks, src_ty, dst_ty, acc, strategy, src_state, dst_state):
    names = kernel.arg_names
    extremum = strategy in (4, 5)
    sig = {}
    for name in names:
        if name == "shift_ptr":
            sig[name] = "*" + src_ty
        elif name == "arrivals_ptr":
            sig[name] = "*i32"   # the fused merge's counters
        elif name in ("part_hi_ptr", "part_lo_ptr"):
            sig[name] = "*" + acc   # the fused merge's partial states
        elif name.endswith("cnt_ptr"):
            # the exact filter's partial states keep the smallest magnitude's key in int32 (launch._Workspace)
            sig[name] = "*i64" if extremum else "*i32" if strategy == 7 else "*fp64"
        elif strategy == 7 and name in ("src_lo_ptr", "dst_lo_ptr") and (src_state if name[0] == "s" else dst_state):
            sig[name] = "*fp32"   # ... and t rounded up to fp32
        elif name == "dst_lo_ptr" and extremum and not dst_state:
            sig[name] = "*i64"   # the indices
        elif name == "dst_lo_ptr" and strategy in (7, 10) and not dst_state:
            sig[name] = "*i8"    # a filter's certification flags
        elif name.endswith("_ptr"):
            is_src = name.startswith("src")
            ty = (acc if src_state else src_ty) if is_src else (acc if dst_state else dst_ty)
            sig[name] = "*" + ty
        elif name.isupper():
            sig[name] = "constexpr"
        elif name == "divisor":
            sig[name] = "fp64"
        else:
            sig[name] = "i64" if name.startswith("stride") or name in ("chunk_len", "red_len") else "i32"
    consts = dict(STRATEGY=strategy, ACC_DTYPE=tl.float64 if acc == "fp64" else tl.float32,
                  SRC_IS_STATE=src_state, DST_IS_STATE=dst_state, DIVIDE=strategy in (0, 1, 7), USES_LO=strategy in (1, 2, 7),
                  TAKE_SQRT=strategy == 2, WRITE_MEAN=strategy == 2 or extremum, **blocks)
    if "HALVES_MIN_LANES" in names:   # the plain sums' lane tree (plan.PLAIN_HALVES_MIN_LANES), as launched
        consts.setdefault("HALVES_MIN_LANES", plan.PLAIN_HALVES_MIN_LANES)
    # the kernel's other constexprs at their defaults (its optional features off): ASTSource leaves an
    # unnamed one None, not its default
    consts = {**constexpr_defaults(kernel), **consts}
    src = ASTSource(fn=kernel, signature=sig, constexprs=consts)
    compiled = triton.compile(src, target=TARGET, options={"num_warps": 8})
    if strategy == 2 and not dst_state:
        # The standard deviation must be the correctly rounded fp64 square root, not sqrt.approx.
        ptx = compiled.asm["ptx"]
        assert "sqrt.rn.f64" in ptx and "sqrt.approx" not in ptx, "std's sqrt is not sqrt.rn.f64"
    if strategy == 3 and acc == "fp64":
        # The fp64 mode's bound assumes libdevice's fp64 exp and log, not an fp32 approximation.
        ptx = compiled.asm["ptx"]
        assert "ex2.approx" not in ptx and "lg2.approx" not in ptx, "fp64 logsumexp uses an approximate exp"
    if strategy == 10 and not dst_state:
        # logsumexp's fp32 filter: fp32 exps (its bound counts ex2.approx), the log in fp64 (libdevice).
        ptx = compiled.asm["ptx"]
        assert "lg2.approx" not in ptx, "the certifying log is not fp64's"


def compile_exp_recompute_variants() -> int:
    """logsumexp's fp64 recompute (16-bit inputs): libdevice's fp64 exp and log, no approximation."""
    cases = 0
    for ty, chunked, one_tile, group in itertools.product(("i16", "fp16"), (False, True), (False, True), (1, 16)):
        sig = {name: ("*" + ty if name in ("src_ptr", "out_ptr") else "*i8" if name == "flags_ptr" else
                      "*fp64" if name.startswith("part_") else "*i32" if name == "arrivals_ptr" else
                      "constexpr" if name.isupper() else "i64" if name.startswith("stride") or name == "red_len"
                      else "i32") for name in exp_recompute_kernel.arg_names}
        ptx = triton.compile(ASTSource(fn=exp_recompute_kernel, signature=sig,
                                       constexprs=dict(BLOCK_O=256, BLOCK_R=1024, CHUNKED=chunked, ONE_TILE=one_tile,
                                                       GROUP=group, GROUP_R=32, GROUP_ONE_TILE=one_tile,
                                                       GROUP_MIN=4, BLOCK_CHUNKS=64 if chunked else 1)),
                             target=TARGET, options={"num_warps": 4}).asm["ptx"]
        assert "ex2.approx" not in ptx and "lg2.approx" not in ptx, "the fp64 recompute uses an approximate exp"
        cases += 1
    print(f"logsumexp's fp64 recompute: {cases} variants", flush=True)
    return cases


def compile_softmax_variant(kernel, blocks, src_ty, dst_ty, acc, log, j_fast, warps, split_tail=False):
    """softmax's kernels: the single-read one (split_tail: log_softmax's split-tail pass) and the
    normalizing pass (log(s) and max in fp64)."""
    sig = {}
    for name in kernel.arg_names:
        if name.endswith("_ptr"):
            sig[name] = "*" + (src_ty if name == "src_ptr" else dst_ty if name == "dst_ptr" else "fp64")
        else:
            sig[name] = "constexpr" if name.isupper() else "i32"
    consts = dict(LOG=log, ACC_DTYPE=tl.float64 if acc == "fp64" else tl.float32, **blocks)
    if "J_FAST" in kernel.arg_names:
        consts["J_FAST"] = j_fast
    if "SPLIT_TAIL" in kernel.arg_names:
        consts["SPLIT_TAIL"] = split_tail
    compiled = triton.compile(ASTSource(fn=kernel, signature=sig, constexprs=consts), target=TARGET,
                              options={"num_warps": warps})
    ptx = compiled.asm["ptx"]
    if acc == "fp64":
        assert "ex2.approx" not in ptx and "lg2.approx" not in ptx, "fp64 softmax uses an approximate exp"
    if dst_ty == "bf16":
        # The GPU path stores bf16 natively: its rounding must be to nearest even, as the int16 path's.
        assert "cvt.rn.bf16.f32" in ptx and "cvt.rz" not in ptx, "bf16 output not rounded to nearest"


def compile_split_tail_variants() -> int:
    """log_softmax's split-tail kernel of the two-pass path (fp64 log(s) and max per row), both layouts."""
    cases = 0
    for src_ty, j_fast, flat in itertools.product(["fp32", "i16", "fp16", "fp64"], [True, False], [False, True]):
        sig = {name: ("*" + src_ty if name == "src_ptr" else "*fp64" if name.endswith("_ptr") else
                      "constexpr" if name.isupper() else "i32") for name in split_tail_kernel.arg_names}
        blocks = dict(BLOCK_ROWS=1, BLOCK_J=2048) if j_fast else dict(BLOCK_ROWS=128, BLOCK_J=16)
        triton.compile(ASTSource(fn=split_tail_kernel, signature=sig,
                                 constexprs=dict(J_FAST=j_fast, PARTIAL=flat, FLAT_GRID=flat, **blocks)),
                       target=TARGET, options={"num_warps": 4})
        cases += 1
        print(f"split_tail_kernel {src_ty} j_fast={j_fast} partial/flat={flat}", flush=True)
    return cases


def compile_atomic_variants() -> int:
    """The extrema's atomic schedule: the streaming kernel (max / min over fp32, bf16 bits, fp16) and
    the finishing gather."""
    cases = 0
    for src_ty, strategy in itertools.product(["fp32", "i16", "fp16"], [4, 5]):
        sig = {name: ("*" + src_ty if name == "src_ptr" else "*i64" if name == "key_ptr" else
                      "constexpr" if name.isupper() else "i64" if name.startswith("stride") or name in
                      ("chunk_len", "red_len") else "i32") for name in atomic_extremum_kernel.arg_names}
        consts = dict(STRATEGY=strategy, BLOCK_M=1, BLOCK_N=2048)
        ptx = triton.compile(ASTSource(fn=atomic_extremum_kernel, signature=sig, constexprs=consts), target=TARGET,
                             options={"num_warps": 8}).asm["ptx"]
        assert "atom.global" in ptx and "max.s64" in ptx, "the atomic schedule lost its int64 atomic max"
        cases += 1
    for src_ty in ("fp32", "i16", "fp64"):
        sig = {name: ("*" + src_ty if name in ("src_ptr", "values_ptr") else "*i64" if name.endswith("_ptr") else
                      "constexpr" if name.isupper() else "i32") for name in atomic_finish_kernel.arg_names}
        triton.compile(ASTSource(fn=atomic_finish_kernel, signature=sig, constexprs=dict(WITH_INDEX=True, BLOCK=1024)),
                       target=TARGET, options={"num_warps": 4})
        cases += 1
    print(f"atomic schedule: {cases} variants", flush=True)
    return cases


# The inner kernel's lane trees: chained lanes, or pairwise's tile trees and binary counter (the tree
# follows the blocked layout of 16-byte vectors on 8 warps; a merge's vectors are fp32 states).
_CHAINS = dict(TILE_COUNTER=False, TREE_VEC=4, TREE_THREADS=256, STATE_TREE_VEC=4, MERGE_TILE_COUNTER=False)
_COUNTER = dict(TILE_COUNTER=True, TREE_VEC=4, TREE_THREADS=128, STATE_TREE_VEC=4, MERGE_TILE_COUNTER=False)


def main():
    only_strategies = [int(s) for s in sys.argv[sys.argv.index("--strategies") + 1].split(",")] \
        if "--strategies" in sys.argv else None
    cases = compile_atomic_variants() + compile_exp_recompute_variants() + compile_split_tail_variants()
    for (kernel, blocks, warps), (src_ty, dst_ty, acc), log, j_fast in itertools.product(
            [(single_read_kernel, dict(BLOCK_ROWS=1, BLOCK_J=16384, TREE_VEC=4, TREE_THREADS=512,
                                      ROW_BLOCK_STAGES=0), 16),
             (single_read_kernel, dict(BLOCK_ROWS=16, BLOCK_J=256, TREE_VEC=4, TREE_THREADS=256,
                                      ROW_BLOCK_STAGES=2), 8),
             (normalize_kernel, dict(BLOCK_ROWS=8, BLOCK_J=512, FLAT_GRID=False), 4),
             (normalize_kernel, dict(BLOCK_ROWS=8, BLOCK_J=512, FLAT_GRID=True), 4),
             (row_loop_kernel, dict(BLOCK_N=4096, VECTORS=True, TREE_VEC=4, FIRST_READ_EVICTION="evict_last",
                                    LOOP_STAGES=1), 16)],
            [("fp32", "fp32", "fp32"), ("i16", "i16", "fp32"), ("bf16", "bf16", "fp32"), ("bf16", "bf16", "fp64"),
             ("fp16", "fp32", "fp64"), ("fp32", "fp32", "fp64")],
            [False, True], [True, False]):
        if kernel is normalize_kernel and src_ty == "bf16":
            continue   # the normalizing pass takes bf16 as int16 everywhere
        if kernel is row_loop_kernel and not j_fast:
            continue   # contiguous rows only
        if kernel is single_read_kernel and acc == "fp64" and blocks["BLOCK_J"] > 8192:
            continue   # beyond SINGLE_READ_MAX_ROW for an fp64 accumulator
        if only_strategies is not None:
            continue   # --strategies: the reduction kernels of those strategies only
        # log_softmax's split-tail pass: the single-read and row-loop kernels, in fp64, or in fp32 into a
        # 16-bit output
        splits = [False, True] if kernel is not normalize_kernel and log and (acc == "fp64" or dst_ty != "fp32") \
            else [False]
        for split_tail in splits:
            started = time.time()
            compile_softmax_variant(kernel, blocks, src_ty, dst_ty, acc, log, j_fast, warps, split_tail)
            cases += 1
            print(f"{kernel.__name__} {blocks} {src_ty}->{dst_ty} acc={acc} log={log} j_fast={j_fast} "
                  f"split_tail={split_tail}: {time.time() - started:.1f}s", flush=True)
    for (kernel, blocks), (src_ty, dst_ty, acc), strategy, (src_state, dst_state) in itertools.product(
            [(inner_kernel, dict(BLOCK_M=1, BLOCK_N=4096, LOOP_STAGES=4, MERGE_LANES=0, **_CHAINS)),
             (inner_kernel, dict(BLOCK_M=16, BLOCK_N=256, LOOP_STAGES=1, MERGE_LANES=0, **_CHAINS)),
             (inner_kernel, dict(BLOCK_M=1, BLOCK_N=1024, LOOP_STAGES=1, MERGE_LANES=16, **_CHAINS)),
             (inner_kernel, dict(BLOCK_M=1, BLOCK_N=2048, LOOP_STAGES=4, MERGE_LANES=16, **_COUNTER)),
             (outer_kernel, dict(BLOCK_R=32, BLOCK_I=128, TILE_COUNTER=False, LOOP_STAGES=4)),
             (outer_kernel, dict(BLOCK_R=4, BLOCK_I=1024, TILE_COUNTER=False, LOOP_STAGES=1)),
             (outer_kernel, dict(BLOCK_R=4, BLOCK_I=1024, TILE_COUNTER=True, LOOP_STAGES=4))],
            [("fp32", "fp32", "fp32"), ("i16", "i16", "fp32"), ("fp16", "fp32", "fp64"), ("fp64", "fp64", "fp64")],
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [(False, False), (False, True), (True, False)]):
        if strategy != 0 and blocks.get("TILE_COUNTER"):
            continue   # the binary counter is pairwise's (plain strategy) only
        if strategy == 7 and (acc != "fp64" or src_ty == "fp64"):
            continue   # the exact filter: fp32 / 16-bit inputs, fp64 state
        if strategy == 10 and (acc != "fp32" or src_ty == "fp64"):
            continue   # logsumexp's filter: fp32 state
        if only_strategies is not None and strategy not in only_strategies:
            continue
        if blocks.get("MERGE_LANES") and (src_state or dst_state):
            continue   # the fused merge: a first pass that writes the output
        started = time.time()
        compile_variant(kernel, blocks, src_ty, dst_ty, acc, strategy, src_state, dst_state)
        cases += 1
        print(f"{kernel.__name__} {blocks} {src_ty}->{dst_ty} acc={acc} strategy={strategy} "
              f"state in/out={src_state}/{dst_state}: {time.time() - started:.1f}s", flush=True)
    # logsumexp's fp32 filter finishing its uncertified rows in its own launch (plan.certified_exp_in_one_launch)
    for blocks, src_ty in itertools.product(
            [dict(BLOCK_M=16, BLOCK_N=256, LOOP_STAGES=1, MERGE_LANES=0, EXP_FINISH_LANES=16, **_CHAINS),
             dict(BLOCK_M=1, BLOCK_N=4096, LOOP_STAGES=4, MERGE_LANES=0, EXP_FINISH_LANES=256, **_CHAINS)],
            ["i16", "fp16"]):
        if only_strategies is not None and 10 not in only_strategies:
            continue
        started = time.time()
        compile_variant(inner_kernel, blocks, src_ty, src_ty, "fp32", 10, False, False)
        cases += 1
        print(f"inner_kernel {blocks} {src_ty} strategy=10 finished in one launch: {time.time() - started:.1f}s",
              flush=True)
    print(f"compiled {cases} kernel variants for sm_90")


if __name__ == "__main__":
    main()
