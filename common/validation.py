"""Validation at the edge, shared by every form, query string and API body.

Text must be printable: no NUL (PostgreSQL refuses it in text and jsonb, so one stored NUL
breaks the transaction that carries it), no other C0/C1 control character (terminal escapes
in logs and CSV), and no Unicode bidirectional override (text that displays in another order
than it reads: CVE-2021-42574, "Trojan Source"). Multi-line fields may keep newlines and
tabs. Dates must lie in [EARLIEST_DATE, LATEST_DATE], so that date arithmetic (a month's
end, the day after a period) never overflows Python's date range (year 1 to 9999).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

EARLIEST_DATE = date(2000, 1, 1)
LATEST_DATE = date(2099, 12, 31)
# Explicit directional formatting characters (Unicode UAX #9, section 2).
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_LINE_BREAKS = frozenset("\n\r\t")


# A team's or an environment's slug as a URL, a query string or an API body gives it (Django's
# slug characters). One pattern for forms, views and API schemas alike.
SLUG_PATTERN = r"^[-a-zA-Z0-9_]+$"
_SLUG = re.compile(SLUG_PATTERN)


def is_slug(value: str, *, max_length: int = 50) -> bool:
    """Whether ``value`` (a query string's team, say) can name a slug at all: 1 to
    ``max_length`` slug characters. Refusing anything else early also keeps a NUL, which
    PostgreSQL refuses in a query, out of the database."""
    return 0 < len(value) <= max_length and _SLUG.fullmatch(value) is not None


def text_problem(value: str, *, multiline: bool = False) -> str | None:
    """Why ``value`` is not printable text, in words, or None when it is. Categories are
    Unicode's: Cc (controls, NUL included), Cs (lone surrogates), plus the bidi controls."""
    for char in value:
        if multiline and char in _LINE_BREAKS:
            continue
        if char == "\x00":
            return "It contains a NUL character."
        category = unicodedata.category(char)
        if category in ("Cc", "Cs"):
            return f"It contains the control character U+{ord(char):04X}."
        if char in _BIDI_CONTROLS:
            return f"It contains the text-direction control U+{ord(char):04X}."
    return None


def validate_printable(value: str) -> None:
    """Django validator: one line of printable text. Raises ValidationError."""
    problem = text_problem(value)
    if problem:
        raise ValidationError(f"Use printable text only. {problem}", code="unprintable")


def validate_printable_multiline(value: str) -> None:
    """Django validator: printable text that may span lines. Raises ValidationError."""
    problem = text_problem(value, multiline=True)
    if problem:
        raise ValidationError(f"Use printable text only. {problem}", code="unprintable")


def validate_date_in_range(value: date) -> None:
    """Django validator: a date in [EARLIEST_DATE, LATEST_DATE]. Raises ValidationError."""
    if not EARLIEST_DATE <= value <= LATEST_DATE:
        raise ValidationError(
            f"Give a date from {EARLIEST_DATE:%Y-%m-%d} to {LATEST_DATE:%Y-%m-%d}.",
            code="date_range",
        )


class TextField(forms.CharField):
    """A CharField of printable text; ``multiline=True`` allows newlines and tabs. Django's
    CharField already refuses NUL; this refuses the other controls too."""

    def __init__(self, *, multiline: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators.append(validate_printable_multiline if multiline else validate_printable)


class DateInRangeField(forms.DateField):
    """A DateField (YYYY-MM-DD) limited to [EARLIEST_DATE, LATEST_DATE]."""

    default_validators = [validate_date_in_range]
