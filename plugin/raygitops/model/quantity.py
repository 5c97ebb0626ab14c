"""Kubernetes resource quantities compared by value ("1" == 1 == "1000m", "1Gi" == "1073741824")."""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
MAX_QUANTITY_CHARS = 128
# k8s.io/apimachinery/pkg/api/resource: <signedNumber><suffix>, suffix binary, decimal SI or exponent.
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exp>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
)


def parse(value: object) -> Fraction | None:
    """The exact value of a quantity, or None when ``value`` is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None  # .nan / .inf: no quantity, compared as written
        return Fraction(repr(value))
    if not isinstance(value, str):
        return None
    if len(value) > MAX_QUANTITY_CHARS:
        return None  # no real quantity is that long; keeps Fraction (and int()) bounded
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    number = Fraction(match["num"])
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 64:  # no real resource is that big; keeps Fraction bounded
            return None
        return number * Fraction(10) ** exponent
    return number * _SUFFIX[match["suffix"] or ""]


def canonical(value: object) -> object:
    """A quantity as a canonical string ("1073741824", "1/2"); other values unchanged."""
    if isinstance(value, (str, int, float)):
        return _canonical_scalar(value)
    return value


@lru_cache(maxsize=4096, typed=True)  # typed: True and 1 are equal keys otherwise
def _canonical_scalar(value: str | int | float) -> object:
    """Apps repeat a few quantities ("1", "2Gi") thousands of times: parse each once."""
    parsed = parse(value)
    return value if parsed is None else str(parsed)
