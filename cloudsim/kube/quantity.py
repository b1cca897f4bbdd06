"""Kubernetes resource quantities ("500m", "8Gi", "1") as exact Fractions, and back.

Grammar and suffixes from k8s.io/apimachinery/pkg/api/resource (quantity.go): binary Ki..Ei,
decimal n u m k M G T P E, or an exponent (1e3).
"""

import re
from fractions import Fraction

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|[a-zA-Z]*)$")
QUANTITY_RULE = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def parse(value) -> Fraction:
    """A quantity (string or number) as a Fraction; ValueError with the API server's rule."""
    if isinstance(value, bool):
        raise ValueError(QUANTITY_RULE)
    if isinstance(value, int | float):
        return Fraction(str(value))
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise ValueError(QUANTITY_RULE)
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in BINARY:
        return number * BINARY[suffix]
    if suffix in DECIMAL:
        return number * DECIMAL[suffix]
    if suffix[:1] in "eE" and len(suffix) > 1:
        return number * Fraction(10) ** int(suffix[1:])
    raise ValueError(QUANTITY_RULE)


def render(value: Fraction) -> str:
    """The canonical string of a quantity: "0", "3", "500m", "8Gi", "1500M"-style."""
    if value.denominator != 1:
        millis = value * 1000
        if millis.denominator == 1:
            return f"{millis.numerator}m"
        return f"{round(value * 10**9)}n"
    number = value.numerator
    if number == 0:
        return "0"
    for suffix, size in sorted(BINARY.items(), key=lambda item: -item[1]):
        if number % size == 0:
            return f"{number // size}{suffix}"
    return str(number)
