"""The caches kept by call signature, bounded in entries: launch recipes (precred.launch,
precred.norm_launch), eager replays (precred.eager) and checked norm arguments
(precred.ops.normalization).

A process that meets ever new signatures -- a server whose batches come in many token counts, a
training loop over sequences of many lengths -- must not keep every signature's recipe for its life,
nor the GPU scratch a recipe keeps (precred.launch's: their split passes' partial states, per stream;
the norms' replays share one buffer per stream instead, norm_launch._STREAM_SCRATCH). Each cache stays a
plain dict, read with dict.get on every call's host path (a dict subclass's get costs ~10 ns more, CPU
host); writes go through `keep`, which first evicts the oldest entries, in insertion order, while the
cache holds SIGNATURES_KEPT. An evicted signature's next call takes the full path (checks, planning,
Triton's argument binding: tens of microseconds of host time) and is kept again, with the same results
(a recipe launches what the full path launches). Evicting costs nothing on the hits' path.

Evicting a recipe frees its scratch while kernels queued before may still use it. That is safe because
every scratch tensor a recipe keeps was allocated on the CUDA stream that uses it and is used by no
other (the recipes key their scratch by stream): torch's caching allocator hands a freed block only to
later allocations on that same stream, whose kernels run after the ones already queued there.
"""
import threading

# Entries per cache: far more signatures than a training loop or a model's layers meet, few enough
# that the recipes' own scratch stays small (a sum's split partial states: at most ~13 KB a signature on
# DESIGN.md's shapes, by the planner, fp64 states) and the host's memory bounded.
SIGNATURES_KEPT = 1024


# Writers hold it: autograd's worker thread keeps the norms' backward recipes while the caller's thread
# may keep others. Under CPython 3.11's GIL the eviction's steps ran without a thread switch between
# them (4 writers on one full cache, a switch every microsecond: no error without the lock); a build
# without the GIL gives no such promise (a key another thread evicted, a dict resized under an
# iterator). Readers never take it.
_WRITING = threading.Lock()


def keep(cache: dict, key, value) -> None:
    """cache[key] = value, first evicting the oldest entries while the cache is full (a key already
    there is replaced in place and evicts nothing). An unhashable key raises TypeError, as a dict does."""
    with _WRITING:
        if key not in cache:
            while cache and len(cache) >= SIGNATURES_KEPT:
                del cache[next(iter(cache))]
        cache[key] = value
