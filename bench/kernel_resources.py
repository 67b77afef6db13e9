"""Registers, spills, shared memory and global loads of exactly the kernels a public call launches,
compiled for sm_90 without a GPU: the launcher's own arguments, specialized as Triton specializes them
at launch (ints equal to 1 become constexprs, pointers and ints divisible by 16 are marked so), then
ptxas -v. Nothing runs; outputs are not written. Registers per thread bound the programs per SM (65536
per SM: 8 warps at <= 64 registers fit 4 programs), which a memory-bound loop's bytes in flight feel.
sass / shfl / bar: the kernel's machine instructions (nvdisasm), its warp shuffles and its barriers, as
written in the code (a loop body once): what a reduction tree's order costs. f2f64 / dfma: its
conversions to or from fp64 (16 per clock per SM on sm_90, a quarter of the fp64 adds and
multiplies') and its fp64 adds, multiplies and FMAs.

    python bench/kernel_resources.py [plan.CONST=value ...] OP:DTYPE:SHAPE:DIM ...
    e.g. amax:bfloat16:1024x65536:1 sum/kahan:float32:268435456:0 logsumexp/fp64:bfloat16:8192x8192:0
    layer_norm/precise:float32:8192x8192:-1 rms_norm:bfloat16:4096x4096:-1 (forward and backward; DIM
    is ignored: the norms normalize the last dim)

KERNEL_PTX_DIR=DIR keeps each kernel's PTX there (to diff the code of two plans) and its TTGIR (the
layouts Triton chose: where a tile was converted or replicated), KERNEL_SASS_DIR=DIR its
SASS (nvdisasm; to read a loop body's instructions). KERNEL_ERRORS=1
prints the traceback of a kernel that fails to compile (the table shows only its last line).

(bench/compile_check.py compiles every variant with unspecialized ints: it catches front-end errors,
but its 16-bit loads are not vectorized and its register counts are not the launched kernels'.)
"""
import os
import re
import subprocess
import sys
import tempfile
import traceback

os.environ["TRITON_INTERPRET"] = "0"   # compiled kernels (JITFunction), not the interpreter's
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import triton  # noqa: E402
from triton._C.libtriton import native_specialize_impl  # noqa: E402
from triton.backends.compiler import BaseBackend, GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import precred  # noqa: E402
from precred import checks, launch, norm_launch  # noqa: E402

checks.KERNELS_INTERPRETED = True       # let CPU tensors through the checks
launch.INTERPRETER_SM_COUNT = 132
launch.programmatic_dependent_launch = lambda device: True   # the GPU's recompute launches
# Row kernels get bf16 as bf16 on the GPU (int16 bits only under the interpreter): compile the GPU's.
launch.wire_to_row_kernel = norm_launch._wire = lambda t: t
TARGET = GPUTarget("cuda", 90, 32)
PTXAS = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas")
NVDISASM = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/nvdisasm")
SEEN = []


def compile_like_launch(kernel, pointers, scalars, num_warps, consts):
    sig, constexprs, attrs = {}, {}, {}
    values = list(pointers) + list(scalars)
    names = kernel.arg_names
    for i, name in enumerate(names):
        if name in consts:
            sig[name] = "constexpr"; constexprs[name] = consts[name]; continue
        v = values[i]
        ty, spec = native_specialize_impl(BaseBackend, v, False, i not in kernel.do_not_specialize, True)
        if ty == "constexpr":
            sig[name] = "constexpr"; constexprs[name] = spec
        else:
            sig[name] = ty
            if spec == "D":
                attrs[(i,)] = [["tt.divisibility", 16]]
    c = triton.compile(ASTSource(fn=kernel, signature=sig, constexprs=constexprs, attrs=attrs),
                       target=TARGET, options={"num_warps": num_warps,
                                               **({"maxnreg": consts["maxnreg"]} if "maxnreg" in consts else {})})
    return c


def describe(c):
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(c.asm["ptx"])
    cubin = f.name[:-len(".ptx")] + ".cubin"
    out = subprocess.run([PTXAS, "-v", "-arch=sm_90a", f.name, "-o", cubin], capture_output=True, text=True)
    sass = subprocess.run([NVDISASM, cubin], capture_output=True, text=True).stdout
    os.unlink(cubin)
    os.unlink(f.name)
    instructions = re.findall(r"^\s+/\*[0-9a-f]{4}\*/\s+([@!A-Z][^;]*);", sass, re.M)
    regs = re.search(r"Used (\d+) registers", out.stderr)
    spill = re.search(r"(\d+) bytes spill stores", out.stderr)
    ptx = c.asm["ptx"]
    if os.environ.get("KERNEL_PTX_DIR"):   # keep each kernel's PTX, e.g. to diff two plans' code
        os.makedirs(os.environ["KERNEL_PTX_DIR"], exist_ok=True)
        for suffix, text in (("ptx", ptx), ("ttgir", c.asm["ttgir"])):
            with open(os.path.join(os.environ["KERNEL_PTX_DIR"], f"{len(SEEN)}-{c.metadata.name}.{suffix}"), "w") as f:
                f.write(text)
    if os.environ.get("KERNEL_SASS_DIR"):
        os.makedirs(os.environ["KERNEL_SASS_DIR"], exist_ok=True)
        with open(os.path.join(os.environ["KERNEL_SASS_DIR"], f"{len(SEEN)}-{c.metadata.name}.sass"), "w") as f:
            f.write(sass)
    loads = sorted(set(re.findall(r"ld\.global[\.\w]*", ptx)))
    return (f"regs={regs.group(1) if regs else '?'} spill={spill.group(1) if spill else '?'} "
            f"smem={c.metadata.shared} cp.async={ptx.count('cp.async.cg') + ptx.count('cp.async.ca')} loads={loads} "
            f"sass={len(instructions)} shfl={sum('SHFL' in i for i in instructions)} "
            f"bar={sum('BAR.SYNC' in i for i in instructions)} "
            f"f2f64={sum(i.split()[0].startswith('F2F.F64') or ('F2F' in i and '.F64' in i) for i in instructions)} "
            f"dfma={sum(i.split()[0] in ('DADD', 'DMUL', 'DFMA') for i in instructions)}")


def capture(kernel, grid, pointers, scalars, num_warps, **consts):
    try:
        c = compile_like_launch(kernel, pointers, scalars, num_warps, consts)
    except Exception as error:   # show() swallows the host steps' errors: a kernel that fails to compile says so
        if os.environ.get("KERNEL_ERRORS"):
            traceback.print_exception(error)
        SEEN.append((kernel.__name__, grid, num_warps, {}, f"COMPILE FAILED: {type(error).__name__}: "
                     f"{str(error).strip().splitlines()[-1] if str(error).strip() else ''}"))
        raise
    SEEN.append((kernel.__name__, grid, num_warps, {k: v for k, v in consts.items() if k.isupper() and k.startswith(("BLOCK", "LOOP", "MERGE"))}, describe(c)))
    trailing = list(scalars) + [consts[n] for n in kernel.arg_names[len(pointers) + len(scalars):]]
    return None, grid, trailing


launch._launch = capture
norm_launch._launch = capture   # it imports the name


def norm_forward_and_backward(name, x, modes):
    """Capture the forward's launches, then the backward's (called on fp64 statistics of the right
    shape: nothing runs)."""
    from precred.modes import get_norm_mode
    from precred.norm_launch import NormStats, norm_backward, norm_forward
    rows, n = x.shape
    w = torch.empty(n, dtype=x.dtype)
    mode = get_norm_mode(modes.get("mode", precred.modes.DEFAULT_NORM_MODE))
    rms = name == "rms_norm"
    try:
        norm_forward(x, rows, n, w, None if rms else w, 1e-5, rms, mode, x.dtype)
    except Exception:   # outputs are never written: host steps after the launches may trip on them
        pass
    stats = NormStats(torch.empty(rows, dtype=torch.float64), torch.empty(rows, dtype=torch.float64))
    norm_backward(x, x, rows, n, w, stats, rms, mode, w.shape, x.dtype, None if rms else x.dtype)


def show(label, fn):
    SEEN.clear()
    try:
        fn()
    except Exception:   # outputs are never written: host steps after the launches may trip on them
        pass
    for s in SEEN:
        print(f"{label}: {s[0]} grid={s[1]} warps={s[2]} {s[3]} {s[4]}", flush=True)


if __name__ == "__main__":
    import ast
    from plan_variants import set_plan_constants   # bench/, this script's directory
    for arg in [a for a in sys.argv[1:] if a.startswith("plan.")]:   # plan.CONST=value: a planner variant
        name, _, value = arg[len("plan."):].partition("=")
        set_plan_constants({name: ast.literal_eval(value)}, ())   # nothing planned yet: no cache to clear
    cases = [a for a in sys.argv[1:] if not a.startswith("plan.")]
    cases = cases or ["sum:bfloat16:1024x65536:1", "amax:bfloat16:1024x65536:1"]   # sum's default: kahan
    for case in cases:
        op, dt, shape, dim = case.split(":")
        x = torch.empty(tuple(int(s) for s in shape.split("x")), dtype=getattr(torch, dt))
        dim = None if dim == "None" else int(dim)
        name, _, mode = op.partition("/")   # OP or OP/MODE
        modes = {"mode": mode} if mode else {}
        if name in ("layer_norm", "rms_norm"):   # the forward, then the backward with weight (and bias)
            show(case, lambda: norm_forward_and_backward(name, x, modes))
        else:
            show(case, lambda: getattr(precred, name)(x, dim, **modes))
