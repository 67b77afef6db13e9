"""Input families of the error report: named generators from validation.generators, parameterized by a
spec string, and a user's tensor loaded from a .pt or .npy file.

Family specs: `normal`, `uniform`, `offset:1e4` (1e4 + N(0, 1)), `ill:1e8` (condition number S1 / |sum|
near 1e8, Ogita-Rump-Oishi), `wide` (the whole normal exponent range), `alternating`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from validation import generators

FAMILY_HELP = ("normal, uniform, offset:OFFSET (OFFSET + N(0,1)), ill:COND (condition number ~COND), "
               "wide (whole exponent range), alternating")


def family_generator(spec: str):
    """The generator (n, rng, dtype) -> 1-D tensor for a family spec; ValueError naming the spec."""
    name, _, arg = spec.partition(":")
    try:
        value = float(arg) if arg else None
    except ValueError:
        raise ValueError(f"family {spec!r}: {arg!r} is not a number") from None
    if name in ("normal", "uniform", "alternating") and value is None:
        return getattr(generators, name)
    if name == "wide" and value is None:
        return generators.wide_range
    if name == "offset":
        offset = 1e4 if value is None else value
        return lambda n, rng, dtype: generators.large_offset(n, offset, 1.0, rng, dtype)
    if name == "ill":
        cond = 1e8 if value is None else value
        if cond < 1:
            raise ValueError(f"family {spec!r}: a condition number is at least 1")
        return lambda n, rng, dtype: generators.ill_conditioned(n, cond, rng, dtype)
    raise ValueError(f"unknown family {spec!r}; expected one of: {FAMILY_HELP}")


def generate_rows(spec: str, rows: int, n: int, dtype: torch.dtype, seed) -> torch.Tensor:
    """A (rows, n) CPU tensor of `dtype`, each row one draw of the family; deterministic in `seed`
    (an int or a sequence of ints, numpy.random.default_rng's seed)."""
    gen = family_generator(spec)
    rng = np.random.default_rng(seed)
    return torch.stack([gen(n, rng, dtype).reshape(-1) for _ in range(rows)])


def load_rows(path: Path, dtype: torch.dtype | None) -> torch.Tensor:
    """A user's tensor as (rows, n): a .pt file holding one tensor or a .npy array; 1-D is one row,
    more dims are reduced over the last (rows = the product of the others). Cast to `dtype` if given."""
    path = Path(path)
    if not path.exists():
        raise ValueError(f"--input {path}: no such file")
    if path.suffix == ".npy":
        x = torch.from_numpy(np.load(path, allow_pickle=False))
    elif path.suffix in (".pt", ".pth"):
        x = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"--input {path}: expected one tensor, found {type(x).__name__}")
    else:
        raise ValueError(f"--input {path}: expected a .pt or .npy file")
    if not x.is_floating_point():
        raise TypeError(f"--input {path}: expected a floating tensor, got {x.dtype}")
    if x.dim() == 0 or x.shape[-1] < 2:
        raise ValueError(f"--input {path}: need a last dim of at least 2 elements, got shape {tuple(x.shape)}")
    x = x.detach().reshape(-1, x.shape[-1]).contiguous()
    return x.to(dtype) if dtype is not None else x
