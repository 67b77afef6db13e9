"""The GPU kernels of a spread of public calls compile for sm_90, on any machine (no GPU needed).

CI runs the kernels under Triton's interpreter, which accepts code the compiler rejects: a constexpr
parameter with a default value, left out by a nested @triton.jit call, ran on the CPU and failed to
compile on the GPU (the logsumexp rows of 599bda1, found by a benchmark). bench/kernel_resources.py
compiles exactly the kernels a public call launches, specialized as Triton specializes them at launch,
with Triton's own ptxas, without running anything; it needs a process where TRITON_INTERPRET=0.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPILL_LIMIT_BYTES = 1024   # a thread's spill stores, per kernel (see the test)

# OP[/MODE]:DTYPE:SHAPE:DIM -- every op and mode over the schedules its plans take: rows (inner),
# dim 0 (outer), few long rows (split), a full reduction, softmax's single-read / row-loop / two-pass
# paths, the norms' forward and backward (DIM ignored).
CASES = [
    "sum/fast:float32:64x4096:-1", "sum/pairwise:bfloat16:8192x8192:-1", "sum/kahan:bfloat16:1024x65536:-1",
    "sum/fp64:float32:4096x1024:0", "sum/exact:float32:16x262144:-1", "sum/exact:bfloat16:4096x1024:0",
    "sum/exact:float32:64x4096:-1", "mean/exact:bfloat16:512x1000:-1",   # the exact mode in one launch
    "sum/kahan:float32:1048576:0", "mean/fast:float16:512x1000:-1",
    "var/fast:bfloat16:8192x8192:-1", "var/fp64:float32:16x262144:-1", "var/fast:float32:4096x1024:0",
    "var/fast:float32:8192x8192:-1", "var/fast:float32:4096x1520:-1",   # the two-pass rows kernel
    "logsumexp/fast:float32:8192x8192:-1", "logsumexp/fast:bfloat16:16x262144:-1",
    "logsumexp/fast:float32:8192x1024:0", "logsumexp/fp64:bfloat16:8192x8192:-1",
    "logsumexp/fp64:float32:4096x1024:0",
    "logsumexp/accurate:float32:512x65536:-1", "logsumexp/accurate:float32:4096x1000:-1",   # streamed, held
    "logsumexp/accurate:float32:8192x8192:0",   # columns, split (one part: test_gpu_only.py)
    "amax:float32:16x262144:-1", "amax:bfloat16:4096x1024:0", "argmax:float32:8192x8192:-1",
    "argmax:bfloat16:16x262144:0", "prod/fast:float32:4096x1024:-1",
    "softmax/fast:float32:8192x8192:-1", "softmax/fast:float32:1024x65536:-1", "softmax/fp64:bfloat16:1024x65536:-1",
    "softmax/fast:bfloat16:16x262144:-1", "log_softmax/fp64:float32:4096x1024:0",
    "layer_norm/fast:bfloat16:4096x4096:-1", "layer_norm/precise:float32:1024x65536:-1",
    "rms_norm/fast:float32:16x262144:-1",
    # the fp64 statistics of rows held on chip, whose tile Triton's layout pass once replicated into
    # each thread (tree.tree_sum_across_threads' note; 28-104 KB of spills)
    "layer_norm/precise:float32:8192x8192:-1", "rms_norm/precise:bfloat16:8192x8192:-1",
    "layer_norm/precise:float32:65536x1024:-1",
    # tiny and odd shapes: the smallest blocks and masks
    "sum/kahan:bfloat16:3x5:-1", "amin:float16:1000x7:0", "argmin:float32:7x1000:-1",
    "logsumexp/fast:bfloat16:7x1000:-1", "softmax/fast:bfloat16:1000x7:0",
]


def test_public_calls_compile_for_sm90():
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "kernel_resources.py"), *CASES],
                            env={**os.environ, "TRITON_INTERPRET": "0"}, cwd=ROOT, capture_output=True, text=True,
                            timeout=3000)
    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.splitlines()
    failed = [line for line in lines if "COMPILE FAILED" in line]
    assert not failed, "\n".join(failed)
    silent = [case for case in CASES if not any(line.startswith(case + ":") for line in lines)]
    assert not silent, f"no kernel compiled for {silent}: {result.stderr[-2000:]}"
    # Register pressure may spill a few words (these kernels: 64 bytes a thread at most); a tile that
    # lands in local memory whole -- a layout Triton replicated across threads -- spills kilobytes
    # a thread and runs 100x slower (layer_norm precise fp32 8192^2: 65408 bytes, 7 GB/s on an H200).
    kernels = [line for line in lines if " regs=" in line]
    assert all(re.search(r" spill=\d+ ", line) for line in kernels), "ptxas -v gave no spill count"
    spills = [line for line in kernels if int(re.search(r" spill=(\d+) ", line).group(1)) > SPILL_LIMIT_BYTES]
    assert not spills, "\n".join(spills)
