"""The caches kept by call signature are bounded (precred.signature_cache): the oldest signature goes
first, a signature kept again stays where it was, an unhashable key is refused as a dict refuses it;
the norms' replays keep one scratch buffer per stream. The GPU's recipe caches and that scratch in use:
tests/test_gpu_only.py test_many_signatures_keep_bounded_caches_and_the_same_bits."""
import pytest
import torch

import precred
from precred import signature_cache
from precred.ops import normalization
from precred.signature_cache import keep


@pytest.fixture
def capacity_3(monkeypatch):
    monkeypatch.setattr(signature_cache, "SIGNATURES_KEPT", 3)


def test_the_oldest_signature_is_evicted_first(capacity_3):
    cache = {}
    for key in "abcde":
        keep(cache, key, key.upper())
        assert len(cache) <= 3
    assert list(cache.items()) == [("c", "C"), ("d", "D"), ("e", "E")]


def test_a_signature_kept_again_is_replaced_in_place(capacity_3):
    cache = {}
    for key in "abc":
        keep(cache, key, 0)
    keep(cache, "a", 1)   # full, but "a" is there: nothing evicted, its place unchanged
    assert list(cache.items()) == [("a", 1), ("b", 0), ("c", 0)]
    keep(cache, "d", 0)
    assert list(cache) == ["b", "c", "d"]


def test_an_unhashable_key_is_refused_and_changes_nothing(capacity_3):
    cache = {"a": 0}
    with pytest.raises(TypeError):
        keep(cache, ["a"], 1)
    assert cache == {"a": 0}


def test_norms_checked_signatures_stay_bounded(capacity_3, device):
    """ops.normalization._CHECKED (the checks' results by signature, on every device) holds at most
    SIGNATURES_KEPT signatures, and a signature evicted and met again gives the same bits."""
    normalization._CHECKED.clear()
    inputs = [torch.randn(rows, 8, device=device) for rows in range(1, 8)]
    first = [precred.layer_norm(x, [8]) for x in inputs]
    assert len(normalization._CHECKED) == 3
    for x, y in zip(inputs, first):   # every signature evicted before it comes back
        assert torch.equal(precred.layer_norm(x, [8]), y)
        assert len(normalization._CHECKED) <= 3


def test_norm_replays_share_one_scratch_buffer_per_stream(monkeypatch):
    """norm_launch._stream_scratch (the norms' replays' scratch, CUDA only in use; its bookkeeping runs
    on any device): a stream's buffer serves every need it holds, grows on a larger one, is the
    stream's own, and a need past RECIPE_SCRATCH_MAX_BYTES gets a buffer of its own, not kept."""
    from precred import norm_launch

    monkeypatch.setattr(norm_launch, "_STREAM_SCRATCH", {})
    monkeypatch.setattr(norm_launch, "RECIPE_SCRATCH_MAX_BYTES", 4096)
    cpu = torch.device("cpu")
    address, buffer = norm_launch._stream_scratch(cpu, 7, 1000)
    assert buffer.numel() >= 1000 and address == buffer.data_ptr()
    assert norm_launch._stream_scratch(cpu, 7, 10)[1] is buffer          # a smaller need: the same buffer
    grown = norm_launch._stream_scratch(cpu, 7, 3000)[1]
    assert grown is not buffer and grown.numel() >= 3000
    assert norm_launch._stream_scratch(cpu, 7, 1000)[1] is grown        # kept at its largest
    assert norm_launch._stream_scratch(cpu, 8, 1000)[1] is not grown    # another stream's own
    alone = norm_launch._stream_scratch(cpu, 7, 5000)[1]
    assert alone.numel() >= 5000 and norm_launch._stream_scratch(cpu, 7, 10)[1] is grown
    assert len(norm_launch._STREAM_SCRATCH) == 2


def test_scratch_under_a_graph_capture_is_the_calls_own(monkeypatch):
    """precred.stream_scratch (CUDA only in use; its bookkeeping runs on any device, the capture query
    stubbed): a stream's scratch is made once and reused, but a call while the stream is being captured
    gets scratch of its own, kept nowhere -- in StreamScratch and in the norms' shared buffer -- and
    the default stream (0, where no capture can run) never asks."""
    from precred import norm_launch, stream_scratch

    capturing, asked = [False], []
    monkeypatch.setattr(stream_scratch, "_current_stream_capturing", lambda: asked.append(1) or capturing[0])
    made = []
    scratch = stream_scratch.StreamScratch(lambda n: made.append(torch.zeros(n)) or made[-1])
    kept = scratch.get(7, 3)
    assert scratch.get(7, 3) is kept and len(made) == 1 and len(asked) == 2
    capturing[0] = True
    captured = [scratch.get(7, 3), scratch.get(9, 3)]
    assert len(made) == 3 and all(t is not kept for t in captured) and captured[0] is not captured[1]
    assert scratch.kept == {7: kept}                   # nothing of the captures kept
    scratch.keep(9, captured[1])                       # a first call's own scratch, made under capture
    assert 9 not in scratch.kept
    asked.clear()
    assert scratch.get(0, 3) is not None and not asked and scratch.get(0, 3) is scratch.kept[0]
    monkeypatch.setattr(norm_launch, "_STREAM_SCRATCH", {})
    cpu = torch.device("cpu")
    first = norm_launch._stream_scratch(cpu, 7, 1000)[1]
    assert norm_launch._stream_scratch(cpu, 7, 1000)[1] is not first and not norm_launch._STREAM_SCRATCH
    capturing[0] = False
    scratch.keep(9, captured[1])
    assert scratch.get(9, 3) is captured[1]
    shared = norm_launch._stream_scratch(cpu, 7, 1000)[1]
    assert norm_launch._stream_scratch(cpu, 7, 10)[1] is shared and len(norm_launch._STREAM_SCRATCH) == 1
