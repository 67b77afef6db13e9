"""Sweep the single-read layer_norm forward plan (elements per thread x tile, each mode) next to torch
(GPU; sets the elements per thread of precred.plan.plan_norm_forward). Prints GB/s per shape and dtype, one column per
(per_thread, tile) config in the order printed at the end.

    python3 bench/sweep_norm.py

4096^2 reads host-bound on a slow host (about 50 us of kernel): compare the larger shapes.
"""
import sys
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.dirname(__import__("os").path.abspath(__file__))))
import torch, triton
import precred, precred.norm_launch as NL
from precred.plan import plan_single_read, NORM_FORWARD_MAX_ROW
import torch.nn.functional as F
cfgs = [(pt, tile) for pt in (8, 16, 32) for tile in (4096, 16384)]
for shape in [(4096, 4096), (8192, 8192), (65536, 1024)]:
    for dt in (torch.float32, torch.bfloat16):
        x = (torch.randn(shape, device="cuda") * 2 + 3).to(dt)
        w = (torch.rand(shape[-1], device="cuda") + 0.5).to(dt); b = torch.randn(shape[-1], device="cuda").to(dt)
        nb = 2 * x.numel() * x.element_size()
        t = triton.testing.do_bench(lambda: F.layer_norm(x, shape[-1:], w, b, 1e-5), warmup=10, rep=40, return_mode="median")
        row = [f"torch {nb/t/1e6:.0f}"]
        for mode in ("fast", "precise"):
            cells = []
            for pt, tile in cfgs:
                NL.plan_norm_forward = lambda rows, n, accumulator_size, pt=pt, tile=tile: plan_single_read(
                    rows, n, j_fast=True, accumulator_size=accumulator_size, tile_elements=tile, per_thread=pt,
                    max_row=NORM_FORWARD_MAX_ROW[accumulator_size])
                NL._RECIPES.clear()
                try:
                    ms = triton.testing.do_bench(lambda: precred.layer_norm(x, shape[-1:], w, b, 1e-5, mode=mode), warmup=10, rep=40, return_mode="median")
                    cells.append(f"{nb/ms/1e6:.0f}")
                except Exception:  # noqa: BLE001 -- a config that does not compile or launch
                    cells.append("ERR")
            row.append(f"{mode}: " + " ".join(cells))
        print(f"{str(shape):>14} {str(dt)[6:]:>8} | " + " | ".join(row), flush=True)
print("configs (per_thread, tile):", cfgs)
