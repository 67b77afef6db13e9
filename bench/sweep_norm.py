#!/usr/bin/env python3
"""Sweep the single-read layer_norm forward's plan (elements per thread x tile) in each norm mode, next
to torch (GPU; sets the elements per thread of precred.plan.plan_norm_forward).

    python3 bench/sweep_norm.py

Prints GB/s per shape and dtype: torch, then each mode's column per (per_thread, tile) config, in the
order printed at the end. 4096^2 reads host-bound on a slow host (about 50 us of kernel): compare the
larger shapes.
"""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CONFIGS = [(per_thread, tile) for per_thread in (8, 16, 32) for tile in (4096, 16384)]
SHAPES = [(4096, 4096), (8192, 8192), (65536, 1024), (262144, 256)]


def main():
    import torch
    import torch.nn.functional as F
    import triton

    import precred
    import precred.norm_launch as norm_launch
    from precred.plan import NORM_FORWARD_MAX_ROW, plan_single_read

    def gbps(fn, nbytes):
        return nbytes / triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median") / 1e6

    for shape in SHAPES:
        for dtype in (torch.float32, torch.bfloat16):
            x = (torch.randn(shape, device="cuda") * 2 + 3).to(dtype)
            w = (torch.rand(shape[-1], device="cuda") + 0.5).to(dtype)
            b = torch.randn(shape[-1], device="cuda").to(dtype)
            nbytes = 2 * x.numel() * x.element_size()
            row = [f"torch {gbps(lambda: F.layer_norm(x, shape[-1:], w, b, 1e-5), nbytes):.0f}"]
            for mode in precred.NORM_MODES:
                cells = []
                for per_thread, tile in CONFIGS:
                    norm_launch.plan_norm_forward = (
                        lambda rows, n, accumulator_size, element_size, pt=per_thread, te=tile: plan_single_read(
                            rows, n, j_fast=True, accumulator_size=accumulator_size, tile_elements=te,
                            per_thread=pt, max_row=NORM_FORWARD_MAX_ROW[accumulator_size]))
                    norm_launch._RECIPES.clear()   # a recipe would replay the previous config
                    try:
                        run = lambda m=mode: precred.layer_norm(x, shape[-1:], w, b, 1e-5, mode=m)  # noqa: E731
                        cells.append(f"{gbps(run, nbytes):.0f}")
                    except Exception:  # noqa: BLE001 -- a config that does not compile or launch
                        cells.append("ERR")
                row.append(f"{mode}: " + " ".join(cells))
            print(f"{str(shape):>14} {str(dtype)[6:]:>8} | " + " | ".join(row), flush=True)
    print("configs (per_thread, tile):", CONFIGS)


if __name__ == "__main__":
    main()
