"""Sweep the software pipelining of the reduction loops (precred.plan.LOOP_STAGES, the num_stages of
the loops of the schedules named): one subprocess per setting, each timing the op in every listed mode
next to torch's on the same cases (GPU; about a minute per setting per op).

    python3 bench/sweep_stages.py [STAGES,...] [SCHEDULES] [MODES] [CASE_REGEX] [OP]
    e.g. python3 bench/sweep_stages.py 1,3,4 inner+outer fast,fp64,kahan,exact ' d0 '
         python3 bench/sweep_stages.py 1,3,4 inner+outer fast,fp64 '' var_mean
OP: sum (default), var_mean, logsumexp or amax; its strategy is added to
precred.launch.PIPELINED_STRATEGIES for the sweep (1 stage = the plain loop whatever the set says).
Prints GB/s per case: for each setting, the modes' columns then torch's.
"""
import json
import os
import re
import subprocess
import sys

CASES = [((2 ** 28,), 0, "float32"), ((2 ** 28,), 0, "bfloat16"), ((1024, 65536), 1, "float32"),
         ((1024, 65536), 1, "bfloat16"), ((65536, 1024), 1, "float32"), ((65536, 1024), 1, "bfloat16"),
         ((262144, 256), 1, "float32"), ((262144, 256), 1, "bfloat16"), ((8192, 8192), 1, "bfloat16"),
         ((16, 262144), 1, "float32"), ((1024, 65536), 0, "float32"), ((1024, 65536), 0, "bfloat16"),
         ((8192, 8192), 0, "float32"), ((8192, 8192), 0, "bfloat16"), ((65536, 1024), 0, "bfloat16"),
         ((262144, 256), 0, "float32"), ((16, 262144), 0, "float32")]
CHILD = r'''
import json, sys
import torch, triton
sys.path.insert(0, sys.argv[1])
import precred
import precred.launch as launch
import precred.plan as plan
stages, schedules = int(sys.argv[2]), tuple(sys.argv[3].split("+"))
modes, cases, op = json.loads(sys.argv[4]), json.loads(sys.argv[5]), sys.argv[6]
OPS = {"sum": (precred.sum, torch.sum, precred.MODES), "var_mean": (precred.var_mean, torch.var_mean, precred.VAR_MODES),
       "logsumexp": (precred.logsumexp, torch.logsumexp, precred.EXP_MODES), "amax": (precred.amax, torch.amax, None)}
ours, theirs, op_modes = OPS[op]
strategy = op_modes[modes[0]].strategy if op_modes else precred.modes.MAXIMUM_MODE.strategy
launch.PIPELINED_STRATEGIES = launch.PIPELINED_STRATEGIES | {strategy}
plan.LOOP_STAGES = {s: stages if s in schedules else 1 for s in ("inner", "outer")}
plan.plan_reduction.cache_clear()
res = []
for shape, dim, dt in cases:
    x = torch.randn(shape, device="cuda", dtype=getattr(torch, dt))
    nbytes = x.numel() * x.element_size()
    if op == "amax":
        fns = [lambda: ours(x, dim)]
    else:
        fns = [lambda m=m: ours(x, dim, mode=m) for m in modes]
    fns.append(lambda: theirs(x, dim))
    res.append([round(nbytes / triton.testing.do_bench(f, warmup=10, rep=40, return_mode="median") / 1e6) for f in fns])
print(json.dumps(res))
'''


def _label(shape, dim, dtype):
    return f"{'x'.join(map(str, shape)):>12} d{dim} {dtype[:4]}"


def main():
    stages = (sys.argv[1] if len(sys.argv) > 1 else "1,4").split(",")
    schedules = sys.argv[2] if len(sys.argv) > 2 else "inner"
    modes = (sys.argv[3] if len(sys.argv) > 3 else "fast,fp64,kahan,exact").split(",")
    pattern = re.compile(sys.argv[4] if len(sys.argv) > 4 else "")
    op = sys.argv[5] if len(sys.argv) > 5 else "sum"
    cases = [c for c in CASES if pattern.search(_label(*c))]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {}
    for s in stages:
        r = subprocess.run([sys.executable, "-c", CHILD, root, s, schedules, json.dumps(modes), json.dumps(cases), op],
                           capture_output=True, text=True)
        if r.returncode:
            print(f"stages {s}: failed\n{r.stderr[-3000:]}")
            continue
        out[s] = json.loads(r.stdout.strip().splitlines()[-1])
    columns = "precred" if op == "amax" else ", ".join(modes)
    print(f"{op}: schedules pipelined: {schedules}; columns per setting: {columns}, torch")
    for i, case in enumerate(cases):
        cells = " | ".join(f"S{s} " + " ".join(map(str, out[s][i])) for s in out)
        print(f"{_label(*case)}: {cells}", flush=True)


if __name__ == "__main__":
    main()
