"""Scratch reused between the calls of one CUDA stream, and what a CUDA graph capture changes.

The launch recipes (precred.launch, precred.norm_launch) keep their scratch -- split passes' partial
states and arrival counters, the recomputes' chunk sums, the norms' statistics and partial rows -- per
CUDA stream and reuse it: a stream runs its calls in order, so each call has written and read the
scratch before the next one starts, and the counters a call leaves at zero are zero for the next.

A call captured into a CUDA graph (torch.cuda.graph, torch.compile's "reduce-overhead") breaks that
rule: the graph bakes the scratch's addresses in and its replays may run on any stream, beside eager
calls or other graphs of the same call, long after the capture. Before this module (H100,
tests/test_cuda_graphs.py), two graphs that shared a stream's scratch gave wrong exact sums and
layer_norm gradients when replayed side by side, and the norms' buffer that a later eager call on the
capture stream replaced was freed under a graph still writing it (tensors allocated there next were
overwritten by its replays). So a captured call takes scratch of its own, made for it and kept by
nobody: torch allocates it from the graph's private memory pool, which holds it for the graph's
replays (torch's rule for whatever a capture allocates). Zeroed scratch is zeroed by a memset the
graph replays too.

Capture cannot run on the default stream (raw handle 0), where eager calls cost nothing more; on other
streams each call asks torch (cudaStreamIsCapturing: ~0.3 us of host time on an H100's host).
"""
import torch


def _never_capturing() -> bool:
    return False


# torch.cuda.is_current_stream_capturing() less its Python wrapper; a CPU build of torch, where that
# raises, captures nothing.
_current_stream_capturing = (torch._C._cuda_isCurrentStreamCapturing if torch.backends.cuda.is_built()
                             else _never_capturing)


def stream_is_capturing(stream: int) -> bool:
    """Whether the current CUDA stream -- `stream`, its raw handle -- is being captured into a graph."""
    return stream != 0 and _current_stream_capturing()


def with_addresses(tensors: tuple) -> tuple:
    """(tensors, their data_ptr()s): scratch whose addresses the launches take raw, worked out once."""
    return tensors, tuple(t.data_ptr() for t in tensors)


class StreamScratch:
    """What make(*args) returns (scratch tensors, with whatever the caller derives from them once), made
    on a stream's first call and handed to its later ones; a call under capture gets a new one, kept
    nowhere. The caller holds what it got until its launches are queued."""

    def __init__(self, make):
        self.make = make
        self.kept = {}   # stream -> make()'s result

    def keep(self, stream: int, held) -> None:
        """Hand `held` (scratch a first call made itself) to the stream's later calls -- unless that call
        is being captured: then it is the graph's."""
        if not stream_is_capturing(stream):
            self.kept[stream] = held

    def get(self, stream: int, *args):
        """The stream's scratch -- make(*args) on its first call, or on every call under capture."""
        if stream and _current_stream_capturing():   # stream_is_capturing, inlined: a replay's host time
            return self.make(*args)
        held = self.kept.get(stream)
        if held is None:
            held = self.kept[stream] = self.make(*args)
        return held
