"""CUDA graphs (GPU only): every op captured by torch.cuda.graph and replayed on new data gives eager's
bits, on the plans that keep scratch between calls (split passes' partials and arrival counters, the
exact and certified modes' recomputes, the accurate logsumexp's parts, the norms' stream buffer); two
graphs of one signature replayed side by side on two streams keep apart; and a graph captured on a
stream that eager calls also use survives what those calls do to the stream's scratch afterwards.

Capture follows torch's recipe (torch.cuda.graph): warm-up calls on a side stream first -- they compile
the kernels and leave the launch recipes, so the captured call is a replay -- then the capture."""
import contextlib
import functools

import pytest
import torch
from torch._dynamo.utils import counters

import precred
from conftest import same_bits

pytestmark = pytest.mark.gpu


def _exact_cancelling(shape, dtype, device, seed):
    """Rows of huge values that cancel in pairs beside ordinary ones: the exact mode's filter cannot
    certify their sums, so its recompute runs (in chunks, for long rows) on every call."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape, generator=g, device=device)
    x[..., 0:64:2] = 1e30 * (1 + seed)
    x[..., 1:64:2] = -1e30 * (1 + seed)
    return x.to(dtype)


def _randn(shape, dtype, device, seed, scale=1.0):
    g = torch.Generator(device=device).manual_seed(seed)
    return (scale * torch.randn(shape, generator=g, device=device)).to(dtype)


def _logprobs(shape, dim, dtype, device, seed):
    """log_softmax of randn along dim: every logsumexp near 0, where the fp64 mode's fp32 filter
    certifies nothing and the fp64 recompute takes every output."""
    return torch.log_softmax(_randn(shape, torch.float32, device, seed), dim).to(dtype)


@functools.lru_cache(maxsize=None)
def _norm_parameters(n, device, requires_grad=False):
    """(weight, bias) of n elements, made once: no random numbers drawn inside a capture."""
    g = torch.Generator(device=device).manual_seed(99)
    return (torch.randn(n, generator=g, device=device).mul_(0.1).add_(1).requires_grad_(requires_grad),
            torch.randn(n, generator=g, device=device).mul_(0.1).requires_grad_(requires_grad))


def _with_gradients(op, parameters=()):
    """x -> (op's output, then the gradients of x and of `parameters` for the upstream gradient cos(output)):
    forward and backward in one captured region; the upstream gradient varies along the reduced dim, so
    softmax's backward (whose gradient of a constant upstream is zero) computes something."""
    def f(x):
        x = x.detach().requires_grad_(True)
        y = op(x)
        upstream = torch.cos(y.detach().float()).to(y.dtype)
        return (y.detach(), *torch.autograd.grad(y, (x, *parameters), upstream))
    return f


def _norm_with_gradients(norm, n):
    """x -> precred.layer_norm or rms_norm (`norm`) over the last n elements with _norm_parameters' weight
    (and bias, layer_norm's), and the gradients of x and of those parameters (_with_gradients)."""
    def f(x):
        w, b = _norm_parameters(n, x.device, True)
        parameters = (w,) if norm is precred.rms_norm else (w, b)
        return _with_gradients(lambda x: norm(x, (n,), *parameters), parameters)(x)
    return f


@functools.lru_cache(maxsize=None)
def _module(kind, n, dtype, device):
    """A precred.nn module of n features in dtype, its parameters moved off their defaults, made once."""
    module = kind(n, device=device, dtype=dtype)
    g = torch.Generator(device=device).manual_seed(7)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g, device=device).to(dtype))
    return module


def _module_with_gradients(kind, n, dtype):
    def f(x):
        module = _module(kind, n, dtype, x.device)
        return _with_gradients(module, tuple(module.parameters()))(x)
    return f


# name: (input maker (device, seed) -> x, the op on x -> a tensor or a tuple of tensors)
CASES = {
    **{f"sum/{mode}/16x262144/d-1": (lambda d, s: _randn((16, 262144), torch.float32, d, s),
                                     lambda x, mode=mode: precred.sum(x, -1, mode=mode))
       for mode in precred.MODES},
    "sum/fast/bf16/4096x1024/d0": (lambda d, s: _randn((4096, 1024), torch.bfloat16, d, s),
                                   lambda x: precred.sum(x, 0, mode="fast")),
    "sum/kahan/2^22": (lambda d, s: _randn((1 << 22,), torch.float32, d, s), lambda x: precred.sum(x)),
    "sum/exact/cancelling/16x262144/d-1": (lambda d, s: _exact_cancelling((16, 262144), torch.float32, d, s),
                                           lambda x: precred.sum(x, -1, mode="exact")),
    "sum/exact/cancelling/4096x512/d-1": (lambda d, s: _exact_cancelling((4096, 512), torch.float32, d, s),
                                          lambda x: precred.sum(x, -1, mode="exact")),
    "mean/exact/cancelling/512x4096/d0": (lambda d, s: _exact_cancelling((4096, 512), torch.float32, d, s).T,
                                          lambda x: precred.mean(x, 0, mode="exact")),
    "var_mean/4096x4096/d-1": (lambda d, s: _randn((4096, 4096), torch.float32, d, s),
                               lambda x: precred.var_mean(x, -1)),
    "var_mean/fp64/bf16/16x262144/d-1": (lambda d, s: _randn((16, 262144), torch.bfloat16, d, s),
                                         lambda x: precred.var_mean(x, -1, mode="fp64")),
    "std/2048x2048/d0": (lambda d, s: _randn((2048, 2048), torch.float32, d, s), lambda x: precred.std(x, 0)),
    "logsumexp/accurate/16x262144/d-1": (lambda d, s: _randn((16, 262144), torch.float32, d, s, 8.0),
                                         lambda x: precred.logsumexp(x, -1)),
    "logsumexp/accurate/2048x4096/d0": (lambda d, s: _randn((2048, 4096), torch.float32, d, s, 8.0),
                                        lambda x: precred.logsumexp(x, 0)),
    "logsumexp/fp64/bf16/logprobs/16x262144/d-1": (
        lambda d, s: _logprobs((16, 262144), -1, torch.bfloat16, d, s),
        lambda x: precred.logsumexp(x, -1, mode="fp64")),
    "logsumexp/fp64/bf16/logprobs/4096x2048/d0": (
        lambda d, s: _logprobs((4096, 2048), 0, torch.bfloat16, d, s),
        lambda x: precred.logsumexp(x, 0, mode="fp64")),
    "softmax/64x65536": (lambda d, s: _randn((64, 65536), torch.float32, d, s, 4.0),
                         lambda x: precred.softmax(x, -1)),
    "softmax/bf16/4096x1024/d0": (lambda d, s: _randn((4096, 1024), torch.bfloat16, d, s, 4.0),
                                  lambda x: precred.softmax(x, 0)),
    "log_softmax/accurate/16x262144": (lambda d, s: _randn((16, 262144), torch.float32, d, s, 4.0),
                                       lambda x: precred.log_softmax(x, -1, mode="accurate")),
    "max/16x262144/d-1": (lambda d, s: _randn((16, 262144), torch.float32, d, s), lambda x: tuple(precred.max(x, -1))),
    "argmin/bf16/4096x1024/d0": (lambda d, s: _randn((4096, 1024), torch.bfloat16, d, s),
                                 lambda x: precred.argmin(x, 0)),
    "amax/2^22": (lambda d, s: _randn((1 << 22,), torch.float32, d, s), lambda x: precred.amax(x)),
    "prod/256x4096/d-1": (lambda d, s: 1 + 0.01 * _randn((256, 4096), torch.float32, d, s),
                          lambda x: precred.prod(x, -1)),
    "layer_norm/4096x1024": (lambda d, s: _randn((4096, 1024), torch.float32, d, s, 3.0),
                             lambda x: precred.layer_norm(x, (1024,), *_norm_parameters(1024, x.device))),
    "layer_norm/bf16/64x65536": (lambda d, s: _randn((64, 65536), torch.bfloat16, d, s, 3.0),
                                 lambda x: precred.layer_norm(x, (65536,))),
    "rms_norm/8x262144": (lambda d, s: _randn((8, 262144), torch.float32, d, s),
                          lambda x: precred.rms_norm(x, (262144,), _norm_parameters(262144, x.device)[0])),
    "layer_norm_backward/2048x4096": (lambda d, s: _randn((2048, 4096), torch.float32, d, s, 3.0),
                                      _norm_with_gradients(precred.layer_norm, 4096)),
    "layer_norm_backward/32x65536": (lambda d, s: _randn((32, 65536), torch.float32, d, s, 3.0),
                                     _norm_with_gradients(precred.layer_norm, 65536)),
    # fp16 inputs (the cases above are fp32 and bf16)
    "sum/kahan/fp16/4096x1024/d-1": (lambda d, s: _randn((4096, 1024), torch.float16, d, s),
                                     lambda x: precred.sum(x, -1)),
    "logsumexp/accurate/fp16/2048x4096/d-1": (lambda d, s: _randn((2048, 4096), torch.float16, d, s, 4.0),
                                              lambda x: precred.logsumexp(x, -1)),
    "var_mean/fp16/16x262144/d-1": (lambda d, s: _randn((16, 262144), torch.float16, d, s),
                                    lambda x: precred.var_mean(x, -1)),
    # backward passes captured with their forward
    "softmax_backward/bf16/64x65536": (lambda d, s: _randn((64, 65536), torch.bfloat16, d, s, 4.0),
                                       _with_gradients(lambda x: precred.softmax(x, -1))),
    "log_softmax_backward/accurate/16x262144": (
        lambda d, s: _randn((16, 262144), torch.float32, d, s, 4.0),
        _with_gradients(lambda x: precred.log_softmax(x, -1, mode="accurate"))),
    "logsumexp_backward/2048x4096/d0": (lambda d, s: _randn((2048, 4096), torch.float32, d, s, 8.0),
                                        _with_gradients(lambda x: precred.logsumexp(x, 0))),
    "var_backward/fp16/4096x4096/d-1": (lambda d, s: _randn((4096, 4096), torch.float16, d, s),
                                        _with_gradients(lambda x: precred.var(x, -1))),
    "amax_backward/16x262144/d-1": (lambda d, s: _randn((16, 262144), torch.float32, d, s),
                                    _with_gradients(lambda x: precred.amax(x, -1))),
    "prod_backward/256x4096/d-1": (lambda d, s: 1 + 0.01 * _randn((256, 4096), torch.float32, d, s),
                                   _with_gradients(lambda x: precred.prod(x, -1))),
    "rms_norm_backward/8x262144": (
        lambda d, s: _randn((8, 262144), torch.float32, d, s),
        _norm_with_gradients(precred.rms_norm, 262144)),
    # torch.nn modules' replacements, forward and backward
    "nn.LayerNorm/fp16/4096x1024": (lambda d, s: _randn((4096, 1024), torch.float16, d, s, 3.0),
                                    _module_with_gradients(precred.nn.LayerNorm, 1024, torch.float16)),
    "nn.RMSNorm/bf16/2048x4096": (lambda d, s: _randn((2048, 4096), torch.bfloat16, d, s, 3.0),
                                  _module_with_gradients(precred.nn.RMSNorm, 4096, torch.bfloat16)),
}


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def _capture(f, static_x, stream=None, warmups=2):
    """(graph, its static outputs): f warmed up on a new side stream, or on `stream`, then captured on
    `stream`, or on torch's own capture stream where none is given (torch.cuda.graph's default)."""
    side = stream or torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmups):
            f(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        outputs = _as_tuple(f(static_x))
    return graph, outputs


def _assert_replay_is_eager(name, outputs, eager):
    for got, want in zip(outputs, _as_tuple(eager), strict=True):
        assert same_bits(got, want), name


@pytest.mark.parametrize("name", list(CASES))
def test_captured_calls_replay_eagers_bits(device, name):
    """Each case captured once, then replayed on three new inputs: bitwise eager's result on each (the
    scratch's counters left at zero by every replay, the recomputes taking their new rows)."""
    make, f = CASES[name]
    static_x = make(device, 0)
    graph, outputs = _capture(f, static_x)
    for seed in (1, 2, 3):
        x = make(device, seed)
        static_x.copy_(x)
        graph.replay()
        _assert_replay_is_eager(name, outputs, f(x))


SIDE_BY_SIDE = ["sum/fast/16x262144/d-1", "sum/exact/cancelling/16x262144/d-1",
                "logsumexp/accurate/16x262144/d-1", "logsumexp/fp64/bf16/logprobs/16x262144/d-1",
                "layer_norm/bf16/64x65536", "layer_norm_backward/32x65536"]


@pytest.mark.parametrize("name", SIDE_BY_SIDE)
def test_two_graphs_of_one_signature_replay_side_by_side(device, name):
    """Two graphs of the same call, captured one after the other (torch's capture stream both times),
    replayed together on two streams, over and over on different data: each replay gives eager's bits
    -- the graphs share no scratch, whose arrival counters and partial sums would otherwise mix."""
    make, f = CASES[name]
    first_x, second_x = make(device, 0), make(device, 1)
    graphs = [_capture(f, first_x), _capture(f, second_x)]
    inputs = [make(device, seed) for seed in range(2, 6)]
    wants = [_as_tuple(f(x)) for x in inputs]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for round_ in range(24):
        a, b = round_ % len(inputs), (round_ + 1) % len(inputs)
        first_x.copy_(inputs[a])
        second_x.copy_(inputs[b])
        for stream, (graph, _) in zip(streams, graphs):
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                graph.replay()
        for stream in streams:
            torch.cuda.current_stream().wait_stream(stream)
        for (_, outputs), index in zip(graphs, (a, b)):
            for got, want in zip(outputs, wants[index], strict=True):
                assert same_bits(got, want), (name, round_)


def test_graph_survives_later_eager_calls_on_its_capture_stream(device):
    """A graph captured on a stream that eager calls use before and after (torch.cuda.graph(stream=s)):
    later eager calls there that need more scratch (longer rows: the norms' stream buffer grows, the
    old one freed) must not free the memory the graph's replays write -- tensors allocated on that
    stream afterwards (where torch's allocator hands out what the stream freed) keep their values
    through the replays."""
    stream = torch.cuda.Stream()
    small = _randn((4096, 1024), torch.float32, device, 0)
    graph, (y,) = _capture(lambda x: precred.layer_norm(x, (1024,)), small, stream=stream)
    with torch.cuda.stream(stream):   # more stream scratch than the graph's call took, and more again
        for rows in (8192, 32768, 65536):
            x = _randn((rows, 1024), torch.float32, device, rows)
            for _ in range(2):   # the second call replays its recipe, on the stream's buffer
                precred.layer_norm(x, (1024,))
        kept = [torch.full((n,), 7.0, device=device) for n in (2 ** 10, 2 ** 12, 2 ** 14, 2 ** 16, 2 ** 20)]
    torch.cuda.current_stream().wait_stream(stream)
    for seed in (1, 2):
        x = _randn((4096, 1024), torch.float32, device, seed)
        small.copy_(x)
        graph.replay()
        assert same_bits(y, precred.layer_norm(x, (1024,)))
    torch.cuda.synchronize()
    assert all(bool((t == 7.0).all()) for t in kept)


@contextlib.contextmanager
def _reduce_overhead(fn):
    """fn compiled with torch.compile(mode="reduce-overhead", fullgraph=True) on a fresh dynamo; on leaving
    without error, asserts inductor ran every graph with CUDA graphs (no cudagraph skip); dynamo is reset
    on the way out either way, so no compiled graph outlives its test."""
    torch._dynamo.reset()
    counters.clear()
    try:
        yield torch.compile(fn, mode="reduce-overhead", fullgraph=True)
        assert counters["inductor"]["cudagraph_skips"] == 0, "inductor ran without CUDA graphs"
    finally:
        torch._dynamo.reset()


def test_reduce_overhead_compile_replays_eagers_bits(device):
    """torch.compile(mode="reduce-overhead") -- inductor with CUDA graphs (cudagraph trees) -- of a
    block that calls precred's custom ops: each call on new data gives eager's bits."""
    w, b = _norm_parameters(1024, device)

    def block(x):
        h = precred.layer_norm(x, (1024,), w, b)
        return precred.logsumexp(h, -1), precred.var_mean(h, -1), precred.sum(h, 0, mode="exact")

    with _reduce_overhead(block) as compiled:
        for seed in range(4):
            x = _randn((512, 1024), torch.float32, device, seed, 2.0)
            got = compiled(x)
            got = (got[0], *got[1], got[2])
            want = block(x)
            want = (want[0], *want[1], want[2])
            for g, w_ in zip(got, want, strict=True):
                assert same_bits(g.clone(), w_), seed


def _forget_every_signature():
    """Empty the caches kept by call signature (launch recipes, eager replays, checked norm arguments),
    so each op's next call takes the full path: checks, planning, Triton's argument binding."""
    from precred import eager, launch, norm_launch
    from precred.ops import normalization
    for cache in (launch._RECIPES, norm_launch._RECIPES, eager._CALLS, normalization._CHECKED):
        cache.clear()


def _parameters_made_before_capture(device):
    """The cases' weights and biases made now, as a caller makes them before capturing: they draw random
    numbers, and torch makes no generator inside a capture ("Cannot construct a new CUDAGeneratorImpl
    during CUDA graph capture"). The cases find them in the caches."""
    for n, requires_grad in ((1024, False), (262144, False), (4096, True), (65536, True), (262144, True)):
        _norm_parameters(n, device, requires_grad)
    _module(precred.nn.LayerNorm, 1024, torch.float16, device)
    _module(precred.nn.RMSNorm, 4096, torch.bfloat16, device)


COLD = ["sum/exact/cancelling/4096x512/d-1", "var_mean/fp64/bf16/16x262144/d-1", "logsumexp/accurate/2048x4096/d0",
        "logsumexp/fp64/bf16/logprobs/16x262144/d-1", "softmax/bf16/4096x1024/d0", "max/16x262144/d-1",
        "layer_norm_backward/2048x4096", "nn.RMSNorm/bf16/2048x4096"]


@pytest.mark.parametrize("name", COLD)
def test_capture_without_warm_up(device, name):
    """A signature's first call made under capture, without torch's warm-up: it takes the full path
    (the signature caches emptied first) inside the capture -- no host synchronisation, no allocation
    outside the graph's pool -- and the graph replays eager's bits; eager calls after it, which replay
    the recipe the captured call kept, too."""
    make, f = CASES[name]
    static_x = make(device, 0)
    _parameters_made_before_capture(static_x.device)
    _forget_every_signature()
    graph, outputs = _capture(f, static_x, warmups=0)
    for seed in (1, 2):
        x = make(device, seed)
        static_x.copy_(x)
        graph.replay()
        _assert_replay_is_eager(name, outputs, f(x))


@pytest.mark.parametrize("kind", [precred.nn.LayerNorm, precred.nn.RMSNorm], ids=lambda k: k.__name__)
def test_reduce_overhead_compile_of_a_training_step(device, kind):
    """A training step compiled with mode="reduce-overhead": cudagraph trees capture the forward and the
    backward (precred::norm_backward among its kernels) and replay them. Loss = the exact sum of
    norm(x) * c, whose steps round as eager's (one product each; the exact sum correctly rounded), so
    each step's loss and gradients -- x's and the module's parameters' -- are eager's bits."""
    module = _module(kind, 1024, torch.float32, device)
    c = torch.linspace(-1, 1, 1024, device=device)

    def loss_of(x):
        return precred.sum(module(x) * c, mode="exact")

    def step(loss_fn, x):
        x = x.detach().requires_grad_(True)
        loss = loss_fn(x)
        return [t.clone() for t in (loss.detach(), *torch.autograd.grad(loss, (x, *module.parameters())))]

    with _reduce_overhead(loss_of) as compiled:
        for seed in range(4):
            x = _randn((512, 1024), torch.float32, device, seed, 2.0)
            got = step(compiled, x)
            for g, w in zip(got, step(loss_of, x), strict=True):
                assert same_bits(g, w), seed
