"""What the planner-variant scripts share (bench/sweep_outer.py, profile_norm.py, profile_kernels.py,
probe_accurate_columns.py, exact_fallback.py): the timing of a call, its kernels' device times, and the
setting of precred.plan constants, with the caches that would replay the previous plan."""
import ast
import contextlib

import torch
import triton

from precred import eager, launch, plan


def median_ms(fn) -> float:
    """Median milliseconds of fn (triton.testing.do_bench, L2 flushed between calls)."""
    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")


FLUSH_BYTES = 256 << 20   # larger than the L2 of an H100 / H200 (50 / 60 MiB), as do_bench's flush


def kernel_times(fn, calls: int = 5, flush: bool = True) -> dict:
    """{kernel name: device microseconds per call} of fn from torch.profiler, each call after an L2 flush
    (as under the protocol; the flush's own kernel left out) unless flush=False (back-to-back calls)."""
    buffer = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda") if flush else None
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            if flush:
                buffer.zero_()
            fn()
        torch.cuda.synchronize()
    flush_names = set()
    if flush:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as probe:
            buffer.zero_()
            torch.cuda.synchronize()
        flush_names = {e.key for e in probe.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA}
    times = {}
    for event in prof.key_averages():
        if (event.device_type == torch.autograd.DeviceType.CUDA and event.device_time_total > 0
                and event.key not in flush_names):
            times[event.key[:48]] = event.device_time_total / calls
    return times


def set_plan_constants(constants: dict, caches) -> None:
    """Set precred.plan's constants by name, then clear each cache in `caches` (lru caches of planners,
    launch-recipe dicts): a cached plan or recipe would replay what the previous constants planned.
    A name precred.plan does not have is an error: a misspelt constant would time the default plan."""
    for name, value in constants.items():
        if not hasattr(plan, name):
            raise ValueError(f"precred.plan has no constant {name!r} (variant {constants})")
        setattr(plan, name, value)
    for cache in caches:
        (cache.cache_clear if hasattr(cache, "cache_clear") else cache.clear)()


@contextlib.contextmanager
def plan_constants(constants: dict, caches=None):
    """precred.plan's constants set (set_plan_constants) for the block, then their values before it
    restored -- also when the block raises. caches: what to clear each time (default: every_plan_cache())."""
    caches = every_plan_cache() if caches is None else caches
    saved = {name: getattr(plan, name) for name in constants if hasattr(plan, name)}
    set_plan_constants(constants, caches)
    try:
        yield
    finally:
        set_plan_constants(saved, caches)


def every_plan_cache() -> tuple:
    """Every cached planner of precred.plan (the reduction's, softmax's row plans, ...) and the launch
    recipes: what a change of planner constants must clear."""
    planners = [f for f in vars(plan).values() if hasattr(f, "cache_clear")]
    return (*planners, launch._RECIPES, eager._CALLS)


def parse_assignments(assignments) -> dict:
    """{CONST: value} of "CONST=value" strings (values: Python literals)."""
    return {k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in assignments if a)}


def parse_variant(spec: str) -> tuple:
    """("name", {CONST: value}) of a "name:CONST=value;CONST=value" option (values: Python literals)."""
    name, _, assignments = spec.partition(":")
    return name, parse_assignments(assignments.split(";"))
