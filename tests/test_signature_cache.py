"""The caches kept by call signature are bounded (precred.signature_cache): the oldest signature goes
first, a signature kept again stays where it was, an unhashable key is refused as a dict refuses it.
The GPU's recipe caches and the norms' per-stream scratch: tests/test_gpu_only.py
test_many_signatures_keep_bounded_caches_and_the_same_bits."""
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
