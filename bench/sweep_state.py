"""Sweep the plan of the stateful kernels -- Welford (var_mean), the stable exponential sum
(logsumexp) or the exact mode's filter (sum, next to fast and fp64): heavy-state halving on/off x first-pass
tile size (GPU; one device call, about a minute).

    python3 bench/sweep_state.py var | logsumexp | exact
Prints GB/s per (setting, case, mode) next to torch's op, to choose the planner's rule for the strategy
from measurements. Explicit plans skip the launch recipes: every call takes the full host path, so cases
of short kernels read host-bound (H100: logsumexp 8192^2 bf16 over dim 0 read 727 GB/s here against
1985 through the public call) -- compare settings within a case, not with the other suites.
"""
import itertools
import sys

import torch
import triton

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
from precred.launch import plan_for, reduce_logsumexp, reduce_moments, reduce_sum  # noqa: E402
from precred.modes import EXP_MODES, MODES, VAR_MODES  # noqa: E402

VAR_CASES = [((8192, 8192), 1, torch.float32), ((1024, 65536), 1, torch.float32), ((16, 262144), 1, torch.float32),
             ((262144, 256), 1, torch.bfloat16), ((8192, 8192), 0, torch.float32), ((8192, 8192), 0, torch.bfloat16),
             ((16, 262144), 0, torch.float32)]
EXP_CASES = [((65536, 1024), 1, torch.float32), ((8192, 8192), 1, torch.float32),
             ((1024, 65536), 1, torch.bfloat16), ((16, 262144), 1, torch.float32), ((8192, 8192), 0, torch.float32),
             ((8192, 8192), 0, torch.bfloat16), ((16, 262144), 0, torch.float32),
             ((1024, 65536), 0, torch.bfloat16), ((262144, 256), 0, torch.bfloat16)]
SUM_CASES = [((2 ** 28,), 0, torch.float32), ((1024, 65536), 1, torch.float32), ((65536, 1024), 1, torch.float32),
             ((262144, 256), 1, torch.float32), ((1024, 65536), 1, torch.bfloat16),
             ((65536, 1024), 1, torch.bfloat16), ((8192, 8192), 0, torch.float32),
             ((262144, 256), 0, torch.float32), ((8192, 8192), 0, torch.bfloat16), ((16, 262144), 1, torch.float32)]
# op -> (cases, modes, torch's op, precred's launcher under an explicit plan, the input)
OPS = {
    "var": (VAR_CASES, VAR_MODES, lambda x, d: torch.var_mean(x, d),
            lambda x, d, m, plan: reduce_moments(x, (d,), m, x.dtype, 1.0, False, True, plan=plan),
            lambda shape, dtype: torch.randn(shape, device="cuda", dtype=dtype) + 3.0),
    "logsumexp": (EXP_CASES, EXP_MODES, lambda x, d: torch.logsumexp(x, d),
                  lambda x, d, m, plan: reduce_logsumexp(x, (d,), m, plan=plan),
                  lambda shape, dtype: (torch.randn(shape, device="cuda") * 4).to(dtype)),
    "exact": (SUM_CASES, {m: MODES[m] for m in ("fast", "fp64", "exact")}, lambda x, d: torch.sum(x, d),
              lambda x, d, m, plan: reduce_sum(x, (d,), m, x.dtype, False, plan=plan),
              lambda shape, dtype: torch.randn(shape, device="cuda", dtype=dtype)),
}
SETTINGS = [dict(heavy_state=h, tile_elements=t) for h, t in itertools.product([True, False], [None, 512, 1024, 2048, 4096])]


def _time(fn):
    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")


def main():
    cases, modes, torch_op, launch, make = OPS[sys.argv[1] if len(sys.argv) > 1 else "var"]
    print(torch.cuda.get_device_name())
    for shape, dim, dtype in cases:
        x = make(shape, dtype)
        nbytes = x.numel() * x.element_size()
        base = _time(lambda: torch_op(x, dim))
        cells = [f"{'x'.join(map(str, shape))} d{dim} {str(dtype)[6:]}: torch {nbytes / base / 1e6:.0f}"]
        for mode, m in modes.items():
            best = None
            row = []
            for setting in SETTINGS:
                overrides = {k: v for k, v in setting.items() if v is not None}
                _, plan = plan_for(x, (dim % x.dim(),), m, x.dtype, **overrides)
                ms = _time(lambda: launch(x, dim % x.dim(), m, plan))
                gbps = nbytes / ms / 1e6
                row.append(f"{gbps:.0f}")
                if best is None or gbps > best[0]:
                    best = (gbps, setting, plan.passes[0])
            cells.append(f"{mode} [{' '.join(row)}] best {best[0]:.0f} {best[1]} {best[2]}")
        print("\n   ".join(cells), flush=True)
    print("settings order:", SETTINGS)


if __name__ == "__main__":
    main()
