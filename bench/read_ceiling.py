"""The fastest read of N bytes the timing protocol allows: a bare Triton read kernel (GPU; one call).

    python3 bench/read_ceiling.py [--mib 16,64,128,256,1024] [--all] [--out DIR]

DESIGN.md's protocol times with triton.testing.do_bench, which zeroes a 256 MB buffer before every call
(the L2 flush), so every call starts with L2 full of dirty lines. A goal stated as a share of the copy
ceiling (1 GiB device-to-device copy, read + write) holds for a reduction only if some read of the same
bytes reaches it under that protocol. This times, per size, a probe that does nothing but read: each
program loads a contiguous chunk of fp32 in 16-byte vectors (plain loads, evict_first loads, or a
pipelined loop) and writes one sum, over a sweep of chunk sizes and warps -- the best of them is the
ceiling any reduction of that many bytes can be held to -- next to torch.sum over rows of 65536 and
the copy ceiling, all in one run. --out DIR writes DIR/read-ceiling.json (-> docs/gen_read_ceiling.py ->
docs/read_ceiling.md).
"""
import argparse
import datetime
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0] + "/bench")
from gpu_suite import bench_ms  # noqa: E402  (the protocol's timing: do_bench, L2 flushed)
from report_versions import versions  # noqa: E402


@triton.jit
def read_probe_kernel(x_ptr,   # fp32 input, n elements
                      out_ptr,  # one fp32 per program (its chunk's sum: keeps the loads alive)
                      n, CHUNK: tl.constexpr, BLOCK: tl.constexpr, HINT: tl.constexpr, STAGES: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * CHUNK
    offsets = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for step in tl.range(0, CHUNK, BLOCK, num_stages=STAGES):
        at = start + step + offsets
        if HINT:
            acc += tl.load(x_ptr + at, mask=at < n, other=0.0, eviction_policy="evict_first")
        else:
            acc += tl.load(x_ptr + at, mask=at < n, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc))


def probe_ms(x, exact_sum, abs_sum, chunk, warps, hint, stages, vectors):
    programs = triton.cdiv(x.numel(), chunk)
    out = torch.empty(programs, device=x.device)
    block = 4 * 32 * warps * vectors   # `vectors` 16-byte vectors a thread per step
    fn = lambda: read_probe_kernel[(programs,)](x, out, x.numel(), CHUNK=chunk, BLOCK=block, HINT=hint,
                                                STAGES=stages, num_warps=warps)
    fn()
    torch.cuda.synchronize()
    assert abs(out.double().sum().item() - exact_sum) <= 1e-3 * abs_sum
    return bench_ms(fn)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", default="16,64,128,256,1024")
    ap.add_argument("--out", type=Path, default=None, help="folder for read-ceiling.json")
    ap.add_argument("--all", action="store_true", help="print every probe configuration, not only the best")
    args = ap.parse_args()
    src = torch.empty(1 << 28, device="cuda")
    dst = torch.empty_like(src)
    copy = 2 * src.numel() * 4 / bench_ms(lambda: dst.copy_(src)) / 1e6
    del src, dst
    print(f"{torch.cuda.get_device_name()} | copy ceiling {copy:.0f} GB/s (1 GiB, read + write) | do_bench, L2 flushed")
    run = dict(device=torch.cuda.get_device_name(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
               versions=versions(), copy_gbps=copy, sizes=[])
    for mib in (int(m) for m in args.mib.split(",")):
        x = torch.randn(mib << 18, device="cuda")   # mib MiB of fp32
        nbytes = x.numel() * 4
        rows = x.view(-1, 65536)
        exact_sum, abs_sum = x.double().sum().item(), x.abs().double().sum().item()   # the probes' check
        torch_gbps = nbytes / bench_ms(lambda: torch.sum(rows, -1)) / 1e6
        best, measured = (0.0, None), []
        # steps of 2 vectors a thread over the chunk, and single steps of 2 to 8 (the whole chunk's loads
        # issued at once: the fastest pattern on an H200, 2026-12-01)
        configs = [(chunk, warps, 2, hint, stages) for chunk in (2048, 8192, 32768, 262144) for warps in (4, 8, 16, 32)
                   for hint, stages in ((False, 1), (True, 1), (False, 3)) if 256 * warps < chunk]
        configs += [(128 * warps * vectors, warps, vectors, hint, 1) for warps in (4, 8, 16, 32) for vectors in (2, 4, 8)
                    for hint in (False, True)]
        for chunk, warps, vectors, hint, stages in configs:
            gbps = nbytes / probe_ms(x, exact_sum, abs_sum, chunk, warps, hint, stages, vectors) / 1e6
            config = (chunk, warps, vectors, "evict_first" if hint else "plain", stages)
            best = max(best, (gbps, config))
            measured.append(dict(chunk=chunk, warps=warps, vectors=vectors, loads=config[3], stages=stages, gbps=gbps))
            if args.all:
                print(f"  {mib} MiB chunk, warps, vectors, loads, stages = {config}: {gbps:5.0f} GB/s ({gbps / copy:.3f})")
        print(f"{mib:5d} MiB  torch.sum rows of 65536 {torch_gbps:5.0f} GB/s ({torch_gbps / copy:.3f} of copy)   "
              f"best read probe {best[0]:5.0f} GB/s ({best[0] / copy:.3f} of copy) at chunk, warps, vectors, "
              f"loads, stages = {best[1]}", flush=True)
        run["sizes"].append(dict(mib=mib, torch_sum_rows_gbps=torch_gbps, best_gbps=best[0], probes=measured))
        if args.out is not None:   # rewritten after every size: a run cut short keeps what it measured
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "read-ceiling.json").write_text(json.dumps(run, indent=1))
        del x, rows


if __name__ == "__main__":
    main()
