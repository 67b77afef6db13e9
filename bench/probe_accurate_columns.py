"""Where the `accurate` logsumexp's time goes over a strided axis (GPU; one device call).

    python3 bench/probe_accurate_columns.py [--shapes 1024x65536,8192x8192] [--dim 0] [--dtype bfloat16]
                                            [--variant "name:CONST=value;CONST=value"] ...

Per case (fp32 unless --dtype says otherwise; 16-bit input takes the certified fp32 pass and the fp64
recompute, and has no first stage of its own), GB/s (and the ratio to torch.logsumexp, same run) of: the public call (the launch recipe:
column kernel, merge, recompute, its merge), the first stage alone (launch.accurate_logsumexp_columns
with recompute=False: what the recompute's launches cost when nothing is left to them), the fp64 mode,
and the public call on data whose every 997th column the bound cannot keep (the sparse recompute) and
on data none of whose columns it keeps (log-probabilities: the dense recompute).
Each result is checked to repeat bitwise and against torch's on an fp64 copy (worst error in ulps of
max(|y|, 1); beyond 1 is printed WRONG). Each --variant (precred.plan constants) runs the table again.
"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
import precred  # noqa: E402
from plan_variants import median_ms, parse_variant, plan_constants  # noqa: E402
from precred import launch  # noqa: E402
from precred.layout import reduction_view  # noqa: E402


def _gbps(x, ms):
    return x.numel() * x.element_size() / ms / 1e6


def _worst_error(got: torch.Tensor, x: torch.Tensor, dim: int) -> float:
    """The worst error of a logsumexp of x over dim against torch's on an fp64 copy, in ulps of the
    output's format of max(|y|, 1) (exp_suite.py's measure: log-probabilities' results near 0 read as
    absolute errors). Every mode probed here (`accurate`, `fp64`) is within 1: more is a wrong result."""
    ref = torch.logsumexp(x.double(), dim)
    finite = ref.isfinite()
    if not torch.allclose(got.double()[~finite], ref[~finite], rtol=0, atol=0, equal_nan=True):   # inf, NaN
        return float("inf")
    eps = torch.finfo(got.dtype).eps
    err = (got.double() - ref).abs()[finite] / (eps * ref.abs()[finite].clamp_min(1.0))
    return err.max().item() if err.numel() else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1024x65536,8192x8192,65536x1024,262144x256")
    ap.add_argument("--dim", type=int, default=0)
    ap.add_argument("--dtype", default="float32", help="the input's torch dtype (float32, bfloat16, float16)")
    ap.add_argument("--variant", action="append", default=[], help='"name:CONST=value;CONST=value"')
    args = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}")
    for name, constants in [("default", {})] + [parse_variant(spec) for spec in args.variant]:
        print(f"variant {name}: {constants}")
        with plan_constants(constants):
            _table(args)


def _table(args):
    names = ("public", "stage 1", "fp64", "scattered", "dense")
    print(f"{'case':>18} {'torch':>7} " + " ".join(f"{name:>13}" for name in names))
    for text in args.shapes.split(","):
        shape = tuple(int(n) for n in text.split("x"))
        torch.manual_seed(0)
        x = torch.randn(shape, device="cuda").to(getattr(torch, args.dtype))
        view = reduction_view(x, (args.dim % x.dim(),))
        p = launch._accurate_columns_plan(view, x.device) if x.dtype == torch.float32 else None
        scattered = x.clone()
        # log-probability columns (lse ~ 0): left to the recompute by the 2-ulp certificate
        movable = scattered.movedim(args.dim, -1)
        movable[..., ::997, :] = torch.log_softmax(movable[..., ::997, :], dim=-1)
        dense = torch.log_softmax(x, dim=args.dim)
        # one work list for every first-stage call: nothing is listed on this data (and a block listed
        # stays claimed, so the list never grows past its blocks)
        work = launch.columns_work_list(view, p) if p else None
        calls = {
            "torch": lambda: torch.logsumexp(x, args.dim),
            "public": lambda: precred.logsumexp(x, args.dim),
            "stage 1": (lambda: launch.accurate_logsumexp_columns(view, p, recompute=False, work=work)[0]) if p else None,
            "fp64": lambda: precred.logsumexp(x, args.dim, mode="fp64"),
            "scattered": lambda: precred.logsumexp(scattered, args.dim),
            "dense": lambda: precred.logsumexp(dense, args.dim),
        }
        inputs = {"scattered": scattered, "dense": dense}
        ms, errors = {}, {}
        for name, fn in calls.items():
            if fn is None:
                continue
            first, second = fn(), fn()
            if not torch.equal(first, second):
                print(f"  {name}: NOT bitwise repeatable")
            if name != "torch":
                errors[name] = _worst_error(first, inputs.get(name, x), args.dim)
            ms[name] = median_ms(fn)
        cells = [f"{_gbps(x, ms['torch']):7.0f}"]
        for name in names:
            cells.append(f"{_gbps(x, ms[name]):7.0f} {ms['torch'] / ms[name]:4.2f}x" if name in ms else f"{'-':>13}")
        print(f"{text + ' d' + str(args.dim):>18} " + " ".join(cells), flush=True)
        wrong = [name for name, e in errors.items() if not e <= 1.0]   # NaN counts as wrong
        print(f"{'':>18} worst error (ulps of max(|y|, 1)): "
              + ", ".join(f"{name} {e:.2g}" for name, e in errors.items())
              + (f" -- WRONG: {', '.join(wrong)}" if wrong else ""), flush=True)
        if p is not None:
            print(f"{'':>18} plan: {p}; public {ms['public'] * 1e3:.1f} us, stage 1 {ms['stage 1'] * 1e3:.1f} us")


if __name__ == "__main__":
    main()
