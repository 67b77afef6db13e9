"""Sweep the outer schedule's planner constants on the dim=0 DESIGN.md shapes (GPU; one device call).

    python3 bench/sweep_outer.py
Prints GB/s and the ratio to torch.sum per planner variant (layout of chained passes, tile bytes,
smallest warp count before a split), case and mode, to choose precred.plan's OUTER_CHAINS_IN_REGISTERS,
TILE_BYTES and OUTER_MIN_WARPS from measurements.
"""
import sys

import torch
import triton

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import precred  # noqa: E402
from precred import launch, plan  # noqa: E402
from precred import eager  # noqa: E402

SHAPES = [(16, 262144), (1024, 65536), (8192, 8192), (65536, 1024), (262144, 256)]
MODES = ("fast", "kahan", "fp64")
# (chains in the registers layout, tile bytes, smallest warp count before a split)
VARIANTS = [(False, 16384, 4), (True, 16384, 4), (True, 16384, 8), (True, 32768, 4), (True, 32768, 8),
            (True, 8192, 4)]


def _time(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")


def main():
    print(torch.cuda.get_device_name())
    cases = [(s, d) for d in (torch.float32, torch.bfloat16) for s in SHAPES]
    inputs = {c: torch.randn(c[0], device="cuda", dtype=c[1]) for c in cases}
    base = {c: _time(lambda c=c: torch.sum(inputs[c], 0)) for c in cases}
    print("torch GB/s: " + " ".join(f"{c[0]}{str(c[1])[6:]}={inputs[c].numel() * inputs[c].element_size() / base[c] / 1e6:.0f}"
                                    for c in cases))
    for registers, tile_bytes, min_warps in VARIANTS:
        plan.OUTER_CHAINS_IN_REGISTERS = registers
        plan.TILE_BYTES = tile_bytes
        plan.OUTER_MIN_WARPS = min_warps
        plan.plan_reduction.cache_clear()
        launch._RECIPES.clear()
        eager._CALLS.clear()
        for c in cases:
            x = inputs[c]
            cells = []
            for mode in MODES:
                ms = _time(lambda: precred.sum(x, 0, mode=mode))
                gbps = x.numel() * x.element_size() / ms / 1e6
                cells.append(f"{mode[:4]} {gbps:5.0f} ({base[c] / ms:4.2f})")
            print(f"regs {registers:d} tile {tile_bytes:5d} minw {min_warps}  {str(c[0]):14s} {str(c[1])[6:]:8s} " + "  ".join(cells),
                  flush=True)


if __name__ == "__main__":
    main()
