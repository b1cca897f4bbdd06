"""The two shapes of a hook through which a lower app tells or asks the apps above it without
importing them (../shared/DESIGN.md, "Dependencies point one way"):

- ``Callbacks[C]``: every app that wants to hear of something registers a callback of the
  Protocol ``C`` once (registering the same callback again keeps one); the lower app calls
  ``callbacks`` in registration order.
- ``Provided[P]``: exactly one app answers a question with a function of the Protocol ``P``;
  providing again replaces it, and asking before anyone provided raises ImproperlyConfigured.

The Protocol is the type parameter, so mypy checks the registered function's signature at the
registration call, not a page at run time.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from django.core.exceptions import ImproperlyConfigured

C = TypeVar("C")
P = TypeVar("P")


class Callbacks(Generic[C]):
    """Registered callbacks of one Protocol, in registration order."""

    def __init__(self) -> None:
        self._callbacks: list[C] = []

    def register(self, callback: C) -> C:
        """Register ``callback`` once; returns it (usable as a decorator)."""
        if callback not in self._callbacks:
            self._callbacks.append(callback)
        return callback

    @property
    def callbacks(self) -> tuple[C, ...]:
        return tuple(self._callbacks)


class Provided(Generic[P]):
    """The one answer to a question, provided by the app that knows; ``what`` names it in the
    error raised before it is provided (e.g. "spend (billing registers it in
    BillingConfig.ready())")."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._provider: P | None = None

    def provide(self, provider: P) -> None:
        self._provider = provider

    @property
    def given(self) -> P | None:
        """The provider, or None when no app provided one."""
        return self._provider

    def get(self) -> P:
        """The provider. Raises ImproperlyConfigured when no app provided one."""
        if self._provider is None:
            raise ImproperlyConfigured(f"No app provides {self.what}.")
        return self._provider
