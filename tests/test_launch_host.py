"""The host side of a replayed launch, on the CPU: the arguments launch._Recipe hands Triton's C launch
function. Its shortcuts (the per-stream head of _BoundLaunch, the one pass's pointers picked by
position) must pass exactly what the plain construction -- grid, stream, the launcher's middle
arguments, launch._pass_pointers, the trailing scalars -- would. Triton's driver and the compiled
kernel are stand-ins here: nothing launches."""
from types import SimpleNamespace

import pytest
import torch
import triton.runtime

from precred import launch
from precred.strategies import PLAIN, WELFORD


class _Launcher:
    """A compiled kernel's launcher without scratch: .launch records the C function's arguments."""

    global_scratch_size = 0
    profile_scratch_size = 0
    launch_cooperative_grid = False
    launch_pdl = True

    def __init__(self):
        self.calls = []
        self.launch = lambda *args: self.calls.append(args)


def _compiled():
    return SimpleNamespace(run=_Launcher(), function=1234, packed_metadata=(8, 1, 0))


def _expected(grid, stream, compiled, pointers, trailing):
    middle = (compiled.function, False, True, None, None, compiled.packed_metadata, None, None, None)
    return (*grid, *(1,) * (3 - len(grid)), stream, *middle, *pointers, *trailing)


def test_bound_launch_passes_the_stream_of_each_call():
    compiled = _compiled()
    bound = launch._BoundLaunch(compiled, (5,), (7, 8))
    for stream in (11, 11, 22, 11, 0):   # a changed stream rebuilds the head (0: a null stream)
        bound(stream, (100, 200))
        assert compiled.run.calls[-1] == _expected((5,), stream, compiled, (100, 200), (7, 8))
    assert len(compiled.run.calls) == 5


@pytest.mark.parametrize("schedule", ["inner", "outer"])
@pytest.mark.parametrize("strategy, with_mean", [(PLAIN, False), (WELFORD, True)], ids=["sum", "var_mean"])
def test_one_pass_replay_passes_run_pointers(monkeypatch, schedule, strategy, with_mean):
    streams = iter([31, 31, 47])
    monkeypatch.setattr(triton.runtime, "driver",
                        SimpleNamespace(active=SimpleNamespace(get_current_stream=lambda device: next(streams))))
    compiled = _compiled()
    plan = SimpleNamespace(passes=[SimpleNamespace(parts=1, schedule=schedule)], fused_merge=False)
    workspace = launch._Workspace(strategy, torch.float32, torch.float32, 4, with_mean)
    recipe = launch._Recipe([(compiled, (3, 2), (9,))], plan, workspace)
    assert recipe.run == recipe._run_one_pass
    x = torch.zeros(4, 6)
    for stream in (31, 31, 47):
        out, mean = recipe.run(x, (2, 2))
        assert out.shape == (2, 2) and (mean is not None) == with_mean
        source, out_ptr = x.data_ptr(), out.data_ptr()
        mean_ptr = mean.data_ptr() if with_mean else out_ptr
        pointers = launch._pass_pointers((source,) * 3, (out_ptr, mean_ptr, out_ptr), source, schedule == "inner")
        assert compiled.run.calls[-1] == _expected((3, 2), stream, compiled, pointers, (9,))
