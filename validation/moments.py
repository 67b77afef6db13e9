"""Exact oracle for variance, standard deviation and mean along dims (torch's `correction` semantics).

Per output row of n values: the exact mean S/n and the exact m2 = sum (x - mean)^2 = Q - S^2/n as
Fractions (S = sum x, Q = sum x^2, both exact: for fp32/bf16/fp16 inputs every x^2 is exact in float64
and validation.oracle sums it exactly; fp64 inputs go through Fractions). This is the exact value of
m2 -- the subtraction is of exact rationals, so the cancellation that makes sum(x^2) - n*mean^2 a trap in
floating point cannot happen here. The standard deviation comes from mpmath at 256 bits
(`mp.workprec`), far beyond any format's precision.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np
import torch

from .oracle import _exact_row_sums, _reduced_rows, mpf_to_fraction

__all__ = ["RowMoments", "reference_moments", "exact_sqrt"]


@dataclass(frozen=True)
class RowMoments:
    n: int
    mean: Fraction        # exact mean
    m2: Fraction          # exact sum of squared deviations from the mean
    shift: float          # the kernel's shift K for this row: its first element (reduced indices all 0)
    radius: float         # an upper bound on max |x - K| over the row

    def variance(self, correction: float) -> Fraction | None:
        """m2 / (n - correction); None when n - correction <= 0 (torch: inf or NaN)."""
        d = Fraction(self.n) - Fraction(correction)
        return self.m2 / d if d > 0 else None


def exact_sqrt(value: Fraction, bits: int = 256) -> Fraction:
    """sqrt(value) to `bits` bits, as a Fraction (relative error below 2**-(bits - 1))."""
    with mpmath.workprec(bits):
        return mpf_to_fraction(mpmath.sqrt(mpmath.mpf(value.numerator) / value.denominator))


def _row_moments(row: np.ndarray, squares_exact: bool) -> tuple[Fraction, Fraction]:
    n = row.size
    if squares_exact:
        s, q = _exact_row_sums(np.stack([row, row * row]))
    else:
        fr = [Fraction(float(v)) for v in row]
        s, q = sum(fr, Fraction(0)), sum((v * v for v in fr), Fraction(0))
    return s / n, q - s * s / n


def reference_moments(x: torch.Tensor, dim=None) -> tuple[list[RowMoments], list[int], list[int]]:
    """Exact moments of every output row of a finite tensor along `dim` (torch semantics), row-major
    over the kept dims, with the output shape without and with keepdim."""
    a, out_shape, keep_shape = _reduced_rows(x, dim)
    squares_exact = x.dtype != torch.float64
    rows = []
    for row in a:
        mean, m2 = _row_moments(row, squares_exact)
        shift = float(row[0])
        # |x - K| rounded in float64 is within one ulp: pad by a relative 2^-52.
        radius = float(np.max(np.abs(row - shift))) * (1 + 2.0 ** -52)
        rows.append(RowMoments(row.size, mean, m2, shift, radius))
    return rows, out_shape, keep_shape
