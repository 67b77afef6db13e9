"""Sweep the planner's tile size and warp count on a few DESIGN.md shapes (GPU; one device call).

    python3 bench/sweep_plan.py
Prints GB/s per (tile bytes, warps scale, case, mode) next to torch.sum, to choose precred.plan's
constants from measurements rather than guesses.
"""
import itertools
import sys

import torch
import triton

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import precred  # noqa: E402
from precred import launch, plan  # noqa: E402
from precred import eager  # noqa: E402

CASES = [((8192, 8192), 1, torch.float32), ((8192, 8192), 0, torch.float32), ((2 ** 28,), 0, torch.float32),
         ((65536, 1024), 0, torch.float32), ((16, 262144), 1, torch.float32), ((1024, 65536), 0, torch.bfloat16),
         ((262144, 256), 1, torch.bfloat16)]
_ORIGINAL_WARPS = plan._warps


def _time(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")


def main():
    print(torch.cuda.get_device_name())
    inputs = {c: torch.randn(c[0], device="cuda", dtype=c[2]) for c in CASES}
    base = {c: _time(lambda c=c: torch.sum(inputs[c], c[1])) for c in CASES}
    for tile_bytes, warp_scale in itertools.product([8192, 16384, 32768], [1, 2]):
        plan.TILE_BYTES = tile_bytes
        plan._warps = lambda t, s=warp_scale: max(1, _ORIGINAL_WARPS(t) // s)
        plan.plan_reduction.cache_clear()
        launch._RECIPES.clear()
        eager._CALLS.clear()
        cells = []
        for c in CASES:
            x = inputs[c]
            for mode in ("fast", "kahan"):
                ms = _time(lambda: precred.sum(x, c[1], mode=mode))
                gbps = x.numel() * x.element_size() / ms / 1e6
                cells.append(f"{mode[0]}{gbps:5.0f}({base[c] / ms:4.2f})")
        print(f"tile {tile_bytes:6d} warps/{warp_scale}: " + " ".join(cells), flush=True)
    print("cases: " + ", ".join(f"{c[0]} d{c[1]} {str(c[2])[6:]}" for c in CASES))


if __name__ == "__main__":
    main()
