"""Decimal numbers in a range, as GBNF alternatives: exact for integers of up to 16 digits."""

from __future__ import annotations

import math

INT_MAX = 10**16 - 1  # integers have at most 16 digits, as json_schema's integral-part


def whole_bounds(
    low: float | None, low_excl: bool, high: float | None, high_excl: bool
) -> tuple[int | None, int | None]:
    """The least and greatest integers within the bounds (None: unbounded)."""
    lo = None if low is None else (math.floor(low) + 1 if low_excl else math.ceil(low))
    hi = None if high is None else (math.ceil(high) - 1 if high_excl else math.floor(high))
    return lo, hi


def decimals(low: float | None, low_excl: bool, high: float | None, high_excl: bool) -> list[str]:
    """GBNF alternatives for decimal numbers within the bounds (no exponent): the integers, and
    fractions whose last digit is not zero, which puts k.f strictly inside (k, k + 1) and -k.f
    inside (-k - 1, -k), for the whole parts k whose open interval lies within the bounds."""
    out = integers(*whole_bounds(low, low_excl, high, high_excl))
    fraction = '"." [0-9]{0,15} [1-9]'
    above = 0 if low is None else max(0, math.ceil(low))
    below = INT_MAX if high is None else min(math.floor(high) - 1, INT_MAX)
    if above <= below:
        out.append(f"({' | '.join(naturals(above, below))}) {fraction}")
    above = 0 if high is None else max(0, math.ceil(-high))
    below = INT_MAX if low is None else min(math.floor(-low) - 1, INT_MAX)
    if above <= below:
        out.append(f'"-" ({" | ".join(naturals(above, below))}) {fraction}')
    return out


def integers(lo: int | None, hi: int | None) -> list[str]:
    """GBNF alternatives for the decimal integers in [lo, hi] (None: unbounded, up to 16
    digits); none when there are none."""
    out = []
    if hi is None or hi >= 0:
        start = max(lo, 0) if lo is not None else 0
        stop = INT_MAX if hi is None else min(hi, INT_MAX)
        if start <= stop:
            out += naturals(start, stop)
    if lo is None or lo < 0:
        start = max(1, -hi) if hi is not None else 1
        stop = INT_MAX if lo is None else min(-lo, INT_MAX)
        if start <= stop:
            out.append(f'"-" ({" | ".join(naturals(start, stop))})')
    return out


def naturals(start: int, stop: int) -> list[str]:
    """Alternatives for the decimal forms (no leading zeros) of start..stop, 0 <= start <= stop."""
    out = []
    for digits in range(len(str(start)), len(str(stop)) + 1):
        low = start if digits == len(str(start)) else 10 ** (digits - 1)
        high = stop if digits == len(str(stop)) else 10**digits - 1
        out += _same_length(str(low), str(high))
    return out


def _same_length(low: str, high: str) -> list[str]:
    """Alternatives for the digit strings from `low` to `high`, both of the same length."""
    if low == high:
        return [f'"{low}"']
    common = 0
    while low[common] == high[common]:
        common += 1
    prefix = f'"{low[:common]}" ' if common else ""
    low, high = low[common:], high[common:]
    rest = len(low) - 1
    if rest == 0:
        return [f"{prefix}[{low}-{high}]"]
    if low[1:] == "0" * rest and high[1:] == "9" * rest:
        return [f"{prefix}[{low[0]}-{high[0]}] [0-9]{{{rest}}}"]
    out = [f'{prefix}"{low[0]}" ({" | ".join(_same_length(low[1:], "9" * rest))})']
    if int(low[0]) + 1 <= int(high[0]) - 1:
        out.append(f"{prefix}[{int(low[0]) + 1}-{int(high[0]) - 1}] [0-9]{{{rest}}}")
    out.append(f'{prefix}"{high[0]}" ({" | ".join(_same_length("0" * rest, high[1:]))})')
    return out
