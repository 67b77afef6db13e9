"""Sweep the single-read softmax kernel's plan (GPU; one device call, a few minutes): elements per
thread x tile elements, with the row-length limit lifted, and the row-loop kernel's lanes x warps x loop
stages, on DESIGN.md's shapes, fp32 and bf16,
dim=-1 and dim=0 (where the rows are short enough), both modes; torch's softmax, Liger's (dim=-1;
when liger_kernel imports) and precred's two-pass path alongside.

    python3 bench/sweep_softmax.py [--only REGEX] [--log] [--loop-only] [--modes fast,fp64]
Prints GB/s ((input + output bytes) / median do_bench time) per setting, to set
precred.plan's SINGLE_READ_* constants from measurements. Each setting's output is checked against
torch's fp64 softmax first (a garbage catch: 64 ulp).
"""
import argparse
import itertools
import re
import sys

import torch
import triton

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
from precred.launch import softmax_rows, softmax_statistics_plan  # noqa: E402
from precred.layout import reduction_view  # noqa: E402
from precred.modes import EXP_MODES  # noqa: E402
from precred.plan import ROW_LOOP_MAX_ROW_BYTES, LoopPlan, plan_single_read  # noqa: E402

SHAPES = [(16, 262144), (1024, 65536), (8192, 8192), (65536, 1024), (262144, 256), (4096, 4096),
          (64, 65536), (256, 65536), (2048, 16384), (1024, 32768)]
SETTINGS = list(itertools.product([8, 16, 32, 64], [4096]))   # (per_thread, tile_elements)
MAX_STRIDED_ROW = 4096
LOOP_SETTINGS = list(itertools.product([2048, 4096, 8192], [8, 16, 32], [1]))   # (lanes, warps, stages)
# --loop-only: the row-loop kernel's shapes near the planner's (plan.ROW_LOOP_SHAPE) at 1-4 stages
LOOP_STAGE_SETTINGS = [(n, w, s) for n, w in ((2048, 8), (4096, 16), (2048, 16), (4096, 8), (1024, 4))
                       for s in (1, 2, 3, 4)]


def _time(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def _liger():
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        return LigerSoftmaxFunction.apply
    except Exception as e:   # not installed here: the sweep goes on without it
        print(f"liger unavailable: {type(e).__name__}: {e}"[:200])
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    ap.add_argument("--log", action="store_true", help="log_softmax instead of softmax")
    ap.add_argument("--loop-only", action="store_true",
                    help="the row-loop kernel alone (rows it takes), lanes x warps x stages (LOOP_STAGE_SETTINGS)")
    ap.add_argument("--modes", default=",".join(EXP_MODES), help="comma-separated modes")
    args = ap.parse_args()
    loop_settings = LOOP_STAGE_SETTINGS if args.loop_only else LOOP_SETTINGS
    log = args.log
    torch_op = torch.log_softmax if log else torch.softmax
    print(torch.cuda.get_device_name())
    liger = _liger()
    for shape, dim, dtype in itertools.product(SHAPES, (1, 0), (torch.float32, torch.bfloat16)):
        label = f"{'x'.join(map(str, shape))} d{dim} {str(dtype)[6:]}"
        red = shape[dim]
        if (dim == 0 and red > MAX_STRIDED_ROW) or (args.only and not re.search(args.only, label)):
            continue
        if args.loop_only and (dim == 0 or red * dtype.itemsize > ROW_LOOP_MAX_ROW_BYTES):
            continue
        x = (torch.randn(shape, device="cuda") * 4).to(dtype)
        nbytes = 2 * x.numel() * x.element_size()
        ref = torch_op(x.double(), dim)
        ulp = torch.finfo(dtype).eps * ref.abs().clamp_min(1.0 if log else torch.finfo(dtype).eps)
        cells = [f"{label}: torch {nbytes / _time(lambda: torch_op(x, dim)) / 1e6:.0f}"]
        if liger is not None and dim == 1 and not log:
            try:
                cells[0] += f" liger {nbytes / _time(lambda: liger(x)) / 1e6:.0f}"
            except Exception as e:   # Liger refuses rows over 65536
                cells[0] += f" liger {type(e).__name__}"
        view = reduction_view(x, (dim,))
        for mode in args.modes.split(","):
            m = EXP_MODES[mode]
            acc = m.accumulator_dtype(x.dtype, x.dtype).itemsize
            if args.loop_only:
                _row_loop_cells(cells, x, ref, ulp, nbytes, red, mode, m, log, loop_settings)
                continue
            two_pass = softmax_statistics_plan(x, dim, m, x.dtype)
            row = [f"two-pass {nbytes / _time(lambda: softmax_rows(x, dim, m, x.dtype, log, two_pass)) / 1e6:.0f}"]
            best = None
            for per_thread, tile in SETTINGS:
                plan = plan_single_read(view.outer * view.inner, red, j_fast=dim == 1, accumulator_size=acc,
                                        tile_elements=tile, per_thread=per_thread, max_row=65536)
                try:
                    out = softmax_rows(x, dim, m, x.dtype, log, plan)
                    worst = ((out.double() - ref).abs() / ulp).max().item()
                    gbps = nbytes / _time(lambda: softmax_rows(x, dim, m, x.dtype, log, plan)) / 1e6
                    row.append(f"{gbps:.0f}" + ("" if worst <= 64 else f"(WRONG {worst:.0f} ulp)"))
                    if best is None or gbps > best[0]:
                        best = (gbps, per_thread, tile, plan)
                except Exception as e:
                    row.append(f"ERR {type(e).__name__}")
            cells.append(f"{mode} [{' '.join(row)}] best {best[0]:.0f} pt={best[1]} tile={best[2]} {best[3]}"
                         if best else f"{mode} [{' '.join(row)}]")
            if dim == 1:   # the row-loop kernel: lanes x warps x stages
                _row_loop_cells(cells, x, ref, ulp, nbytes, red, mode, m, log, loop_settings)
        print("\n   ".join(cells), flush=True)
        del x, ref, ulp
    print("settings order (per_thread, tile_elements):", SETTINGS, "row-loop (lanes, warps, stages):", loop_settings)


def _row_loop_cells(cells, x, ref, ulp, nbytes, red, mode, m, log, loop_settings):
    """Appends the row-loop kernel's GB/s per (lanes, warps, stages) of loop_settings to cells."""
    loop = []
    for block_n, warps, stages in loop_settings:
        plan = LoopPlan(red, block_n, warps, stages)
        out = softmax_rows(x, 1, m, x.dtype, log, plan)
        worst = ((out.double() - ref).abs() / ulp).max().item()
        gbps = nbytes / _time(lambda: softmax_rows(x, 1, m, x.dtype, log, plan)) / 1e6
        loop.append(f"{gbps:.0f}" + ("" if worst <= 64 else f"(WRONG {worst:.0f} ulp)"))
    cells.append(f"{mode} row-loop [{' '.join(loop)}]")


if __name__ == "__main__":
    main()
