"""View a reduction as (outer, reduce, inner) from sizes and strides, without copying when possible.

Element (o, j, i) of the view is at o*stride_outer + j*stride_red + i*stride_inner in `source`, and the
outputs are the (o, i) pairs in row-major order, which is the row-major order of the kept dimensions.
Like PyTorch's TensorIterator, adjacent dimensions whose strides chain are coalesced, size-1
dimensions are dropped, and the reduced dimensions -- whose order is irrelevant to a sum -- are sorted by
stride before coalescing. Layouts that still do not fit (kept dimensions in three or more
non-chainable groups, or reduced dimensions that do not chain) are copied once into a contiguous
(kept..., reduced...) tensor: a documented, tested fallback, never a different kernel.
"""
from dataclasses import dataclass
import math

import torch


@dataclass(frozen=True)
class ReductionView:
    source: torch.Tensor     # the tensor the kernels read (the input itself, or the fallback copy)
    outer: int
    red: int
    inner: int
    stride_outer: int
    stride_red: int
    stride_inner: int
    copied: bool             # True when the fallback copy was made


def _coalesce(sizes_strides):
    """Merge adjacent (size, stride) pairs whose strides chain; the order of the list is kept."""
    groups = []
    for size, stride in sizes_strides:
        if groups and groups[-1][1] == stride * size:
            prev_size, _ = groups[-1]
            groups[-1] = (prev_size * size, stride)
        else:
            groups.append((size, stride))
    return groups


def reduction_view(x: torch.Tensor, dims: tuple) -> ReductionView:
    """dims: sorted, unique, non-negative reduced dimensions of x (x.numel() > 0)."""
    kept = [d for d in range(x.dim()) if d not in dims]
    kept_groups = _coalesce([(x.size(d), x.stride(d)) for d in kept if x.size(d) != 1])
    red_pairs = sorted(((x.size(d), x.stride(d)) for d in dims if x.size(d) != 1), key=lambda p: -p[1])
    red_groups = _coalesce(red_pairs)
    red_len = math.prod(size for size, _ in red_groups)

    if len(red_groups) <= 1 and len(kept_groups) <= 2:
        stride_red = red_groups[0][1] if red_groups else 1
        if len(kept_groups) == 2:
            (outer, s_outer), (inner, s_inner) = kept_groups
        elif len(kept_groups) == 1:
            size, stride = kept_groups[0]
            if stride == 1 and stride_red != 1:
                # The kept axis is the contiguous one: present it as `inner` so the outer schedule
                # can load tiles coalesced along it.
                outer, s_outer, inner, s_inner = 1, 0, size, 1
            else:
                outer, s_outer, inner, s_inner = size, stride, 1, 0
        else:
            outer, s_outer, inner, s_inner = 1, 0, 1, 0
        return ReductionView(x, outer, red_len, inner, s_outer, stride_red, s_inner, copied=False)

    # Fallback: one contiguous copy laid out as (kept..., reduced...).
    source = x.permute(*kept, *dims).contiguous()
    outer = math.prod(x.size(d) for d in kept)
    return ReductionView(source, outer, red_len, 1, red_len, 1, 0, copied=True)
