"""Every browser test fails on a Content-Security-Policy violation.

Chromium reports each violation on the console ("Refused to execute inline script because it
violates the following Content Security Policy directive: …"). ``csp_watch`` wraps Playwright's
Browser.new_page and Browser.new_context for one test, so every page the test opens, whichever
fixture made it, is watched; the test's teardown then fails naming the violations.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MARKER = "Content Security Policy"


@contextmanager
def csp_watch() -> Iterator[list[str]]:
    """Yield the list the violations of every page opened meanwhile are appended to."""
    from playwright.sync_api import Browser

    seen: list[str] = []

    def listen(target: Any) -> Any:
        target.on("console", lambda message: _note(seen, message))
        return target

    new_page, new_context = Browser.new_page, Browser.new_context
    Browser.new_page = lambda self, *a, **k: listen(new_page(self, *a, **k))  # type: ignore[method-assign]
    Browser.new_context = lambda self, *a, **k: listen(new_context(self, *a, **k))  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        Browser.new_page, Browser.new_context = new_page, new_context  # type: ignore[method-assign]


def _note(seen: list[str], message: Any) -> None:
    text = message.text
    if MARKER in text:
        seen.append(f"{message.page.url if message.page else '?'}: {text}")
