"""Prototype (GPU; one device call): logsumexp of fp32 rows with fp32 exponentials accurate to a few u
and fp64 sums, and an a-posteriori bound per row -- is it fast enough to be the fp32 default?

The fp64 mode (issue 4's default for fp32) runs libdevice's fp64 exp per element: 61 sm_90 instructions
an element in its loop (1024x65536, bench/kernel_resources.py), issue-bound at ~1.6 TB/s; fast's loop
takes 13.6. Here each lane (a thread's VEC-element vector) keeps (s fp64, m fp32, r fp32): per tile,
m' = max(m, the vector's maximum); each term exp(x - m') is formed from the exact gap (TwoSum: hi + lo)
by an fp32 exponential within c u (strategies/stable_exp.py exp_two_part, c = 4; or ex2 of the product
with log2(e) split hi + lo, EXP=1), widened and added in fp64; the old s is rescaled by the same
exponential of m - m' -- exactly 1 when the maximum did not move -- and each rescale that is not 1 adds
the mass it scaled to r. So |s_hat - s| <= c u (s + r) (first order; fp64 roundings and flushed terms
apart), and the lanes merge by fp64 exponentials (u_64 each). A row whose bound keeps the fp32 result
within 2 ulp would keep it; the rest would be recomputed in fp64. Prototype: finite data, no recompute,
Triton's orders (deterministic per compiled kernel, not yet a fixed tree).

    python3 bench/proto_accurate_lse.py [--shapes 1024x65536,...] [--exp 0,1]
"""
import argparse
import math
import sys

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import precred  # noqa: E402
from plan_variants import median_ms  # noqa: E402
from precred.strategies.stable_exp import exp_two_part  # noqa: E402

_L2E_HI = tl.constexpr(1.4426950216293335)        # fp32(log2 e)
_L2E_LO = tl.constexpr(1.925963033500011e-08)     # log2 e - _L2E_HI
_LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _gap(x, m):
    """x - m as hi + lo exactly (TwoSum); lo 0 where hi is not finite (x or m infinite)."""
    hi = x - m
    bp = hi - x
    ap = hi - bp
    lo = (x - ap) + (-m - bp)
    return hi, tl.where(lo == lo, lo, 0.0)


@triton.jit
def _exp_accurate(x, m, EXP: tl.constexpr):
    hi, lo = _gap(x, m)
    if EXP == 0:
        e = exp_two_part(hi, lo)
    else:
        y = hi * _L2E_HI
        y_lo = tl.fma(hi, _L2E_HI, -y) + (hi * _L2E_LO + lo * _L2E_HI)
        e = libdevice.exp2(y)
        e = tl.fma(e, tl.where(y_lo == y_lo, y_lo, 0.0) * _LN2, e)
    return e


@triton.jit
def lse_rows_accurate(x_ptr, out_ptr, bound_ptr, n, stride, BLOCK: tl.constexpr, VEC: tl.constexpr,
                      EXP: tl.constexpr, STAGES: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * stride
    LANES: tl.constexpr = BLOCK // VEC
    cols = tl.arange(0, BLOCK)
    s = tl.zeros([LANES], tl.float64)
    r = tl.zeros([LANES], tl.float32)
    m = tl.full([LANES], float("-inf"), tl.float32)
    for start in tl.range(0, n, BLOCK, num_stages=STAGES):
        x = tl.load(base + start + cols, mask=start + cols < n, other=float("-inf"), eviction_policy="evict_first")
        v = tl.reshape(x, (LANES, VEC))
        m_new = tl.maximum(m, tl.max(v, 1))
        f = tl.where(m == m_new, 1.0, _exp_accurate(m, m_new, EXP))
        terms = tl.where(m_new[:, None] == float("-inf"), 0.0, _exp_accurate(v, m_new[:, None], EXP))
        scaled = s * f.to(tl.float64)
        r = r * f + tl.where(f != 1.0, scaled.to(tl.float32), 0.0)
        s = scaled + tl.sum(terms.to(tl.float64), 1)
        m = m_new
    big = tl.max(m, 0)
    g = tl.where(m == big, 1.0, tl.exp((m - big).to(tl.float64)))
    total = tl.sum(s * g, 0)
    rescaled = tl.sum(r.to(tl.float64) * g, 0)
    lse = big.to(tl.float64) + tl.log(total)
    tl.store(out_ptr + row, lse.to(tl.float32))
    tl.store(bound_ptr + row, rescaled / total)


def accurate_lse(x, exp_kind, block=None, vec=4, warps=None, stages=3):
    rows, n = x.shape
    block = block or min(4096, triton.next_power_of_2(n))
    warps = warps or max(1, min(8, block // (vec * 32)))
    out = torch.empty(rows, device=x.device)
    rel = torch.empty(rows, device=x.device, dtype=torch.float64)
    lse_rows_accurate[(rows,)](x, out, rel, n, x.stride(0), BLOCK=block, VEC=vec, EXP=exp_kind, STAGES=stages,
                               num_warps=warps)
    return out, rel


def ulp32(v):
    a = v.abs().float()
    return (torch.nextafter(a, torch.full_like(a, math.inf)) - a).double()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1024x65536,8192x8192,65536x1024,262144x256,16x262144")
    ap.add_argument("--exp", default="0,1")
    args = ap.parse_args()
    print(torch.cuda.get_device_name())
    g = torch.Generator(device="cuda").manual_seed(0)
    for text in args.shapes.split(","):
        rows, n = (int(t) for t in text.split("x"))
        for kind, x in (("randn", torch.randn(rows, n, device="cuda", generator=g)),
                        ("randn*8-40", torch.randn(rows, n, device="cuda", generator=g) * 8 - 40)):
            nbytes = x.numel() * 4 + rows * 4
            exact = precred.logsumexp(x, -1, mode="fp64")   # ~0.5 ulp: the reference here
            t_torch = median_ms(lambda: torch.logsumexp(x, -1))
            line = [f"{text:>11} {kind:10s} torch {nbytes / t_torch / 1e6:5.0f}"]
            for mode in ("fast", "fp64"):
                t = median_ms(lambda mode=mode: precred.logsumexp(x, -1, mode=mode))
                line.append(f"{mode} {nbytes / t / 1e6:5.0f} ({t_torch / t:4.2f}x)")
            for e in (int(k) for k in args.exp.split(",")):
                out, rel = accurate_lse(x, e)
                t = median_ms(lambda e=e: accurate_lse(x, e))
                err_ulp = ((out.double() - exact.double()).abs() / ulp32(exact)).max().item()
                # certified within 2 ulp: c u (1 + r / s) + fp64 slack, plus the final rounding's 0.5 ulp
                c = 4.0 if e == 0 else 10.0
                bound = c * 2.0 ** -24 * (1 + rel) * 1.01 + 1e-15
                certified = (bound + 0.5 * ulp32(out) <= 2 * ulp32(out) * (1 - 2.0 ** -20)).double().mean().item()
                same = torch.equal(out, accurate_lse(x, e)[0])
                line.append(f"acc{e} {nbytes / t / 1e6:5.0f} ({t_torch / t:4.2f}x) maxerr {err_ulp:4.2f}ulp "
                            f"cert {certified:5.3f} r/s<={rel.max().item():.2g}{'' if same else ' NONDET'}")
            print("  ".join(line), flush=True)


if __name__ == "__main__":
    main()
