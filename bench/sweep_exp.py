"""Sweep the plan of the stable-exp (logsumexp) kernels: heavy-state halving on/off x first-pass tile
size, on DESIGN.md shapes (GPU; one device call, about a minute).

    python3 bench/sweep_exp.py
Prints GB/s per (setting, case, mode) next to torch.logsumexp, to choose the planner's rule for the
stable-exp strategy from measurements. Explicit plans skip the launch recipes: small cases read host-bound.
"""
import itertools
import sys

import torch
import triton

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import precred  # noqa: E402
from precred.launch import plan_for, reduce_logsumexp  # noqa: E402
from precred.modes import get_exp_mode  # noqa: E402

CASES = [((65536, 1024), 1, torch.float32), ((8192, 8192), 1, torch.float32), ((1024, 65536), 1, torch.bfloat16),
         ((16, 262144), 1, torch.float32), ((8192, 8192), 0, torch.float32), ((8192, 8192), 0, torch.bfloat16),
         ((16, 262144), 0, torch.float32)]
SETTINGS = [dict(heavy_state=h, tile_elements=t) for h, t in itertools.product([True, False], [None, 1024, 2048, 4096])]


def _time(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")


def main():
    print(torch.cuda.get_device_name())
    for shape, dim, dtype in CASES:
        x = (torch.randn(shape, device="cuda") * 4).to(dtype)
        nbytes = x.numel() * x.element_size()
        base = _time(lambda: torch.logsumexp(x, dim))
        cells = [f"{'x'.join(map(str, shape))} d{dim} {str(dtype)[6:]}: torch {nbytes / base / 1e6:.0f}"]
        for mode in precred.EXP_MODES:
            m = get_exp_mode(mode)
            best = None
            row = []
            for setting in SETTINGS:
                overrides = {k: v for k, v in setting.items() if v is not None}
                _, plan = plan_for(x, (dim % x.dim(),), m, x.dtype, **overrides)
                ms = _time(lambda: reduce_logsumexp(x, (dim % x.dim(),), m, plan=plan))
                gbps = nbytes / ms / 1e6
                row.append(f"{gbps:.0f}")
                if best is None or gbps > best[0]:
                    best = (gbps, setting, plan.passes[0])
            cells.append(f"{mode} [{' '.join(row)}] best {best[0]:.0f} {best[1]} {best[2]}")
        print("\n   ".join(cells), flush=True)
    print("settings order:", SETTINGS)


if __name__ == "__main__":
    main()
