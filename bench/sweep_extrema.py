#!/usr/bin/env python3
"""GB/s of the extremum kernels (argmax: values and indices) under planner tile sizes, on the shapes
where the default plan is slow; sets precred.launch's EXTREMA_* tiles from measurements.

    python3 bench/sweep_extrema.py [--tiles 512,1024,2048,4096]
"""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO, REPO / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from gpu_suite import bench_ms, gbps, log  # noqa: E402


def main() -> int:
    import torch
    from precred.launch import plan_for, reduce_extremum
    from precred.modes import MAXIMUM_MODE
    tiles = [int(t) for t in (sys.argv[sys.argv.index("--tiles") + 1] if "--tiles" in sys.argv
                              else "256,512,1024,2048,4096").split(",")]
    for shape, dim in (((16, 262144), 1), ((16, 262144), 0), ((1024, 65536), 1), ((1024, 65536), 0),
                       ((8192, 8192), 0), ((2 ** 28,), 0)):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.randn(shape, device="cuda").to(dtype)
            nbytes = x.numel() * x.element_size()
            cells = []
            for tile in [None] + tiles:
                over = {} if tile is None else dict(tile_elements=tile)
                plan = plan_for(x, (dim,), MAXIMUM_MODE, **over)[1]
                ms = bench_ms(lambda: reduce_extremum(x, (dim,), MAXIMUM_MODE, True, schedule="passes", **over))
                p = plan.passes[0]
                cells.append(f"{tile or 'default'}:{gbps(nbytes, ms):.0f}(l{p.lanes}xb{p.block_kept}xp{p.parts}w{p.num_warps})")
            log(f"{'x'.join(map(str, shape))} d{dim} {str(dtype)[6:]}: " + " ".join(cells))
            del x
    return 0


if __name__ == "__main__":
    sys.exit(main())
