"""Azure location names as the portal stores and compares them.

Azure names a location two ways (GET /subscriptions/{id}/locations): its name, "westus2", and
its display name, "West US 2". Resource bodies normally carry the name, but some answers carry
the display name, so every location read from Azure goes through normalise_location() before
it lands in a dataclass. Like the rest of this package it never imports Django.
"""

from __future__ import annotations

import unicodedata


def normalise_location(value: object) -> str:
    """The location's name: lower case, without whitespace ("West US 2" -> "westus2",
    "eastus" -> "eastus"); "" for None. Azure's display names map to their names this way for
    every public region (az account list-locations: name vs displayName)."""
    if value is None:
        return ""
    text = unicodedata.normalize("NFKC", str(getattr(value, "value", value)))
    return "".join(text.split()).lower()
