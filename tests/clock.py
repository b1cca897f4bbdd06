"""Run the suite with the real clock moved: ``--clock-offset=400d`` or
``--clock-at=2028-02-29T12:00:00Z`` (README, "Tests").

Time-machine moves this process's clock for the whole session and lets it tick; a test's own
``time_machine.travel`` nests inside. Processes the tests start (Celery workers, the emulator,
``manage.py``) see the same moved clock: the plugin exports the offset in ``PORTAL_TEST_CLOCK``
and puts ``tests/clock_site`` first on ``PYTHONPATH``, whose ``sitecustomize`` moves the child's
clock by it at start-up. A test that reads the real date where it should take ``now`` then
fails on the day it is written, not on the day the calendar reaches it.

Loaded with ``-p tests.clock`` (pyproject's addopts); without either option it does nothing.
"""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

ENV = "PORTAL_TEST_CLOCK"  # the offset in seconds, read by tests/clock_site/sitecustomize.py
STARTED = "PORTAL_TEST_CLOCK_STARTED"  # set in a child whose clock sitecustomize moved
SITE = str(Path(__file__).with_name("clock_site"))
_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_traveller: list = []


def clock_offset_parse(text: str) -> timedelta:
    """``400d``, ``-36h``, ``2w3d``, ``90m``, ``30s`` -> a timedelta; ValueError otherwise."""
    parts = re.fullmatch(r"([+-]?)((?:\d+[wdhms])+)", text.strip())
    if not parts:
        raise ValueError(f"not an offset like 400d, -36h or 2w3d: {text!r}")
    seconds = sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)([wdhms])", parts[2]))
    return timedelta(seconds=-seconds if parts[1] == "-" else seconds)


def clock_at_parse(text: str) -> datetime:
    """An ISO 8601 instant (``2028-02-29T12:00:00Z``) -> an aware UTC datetime."""
    at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if at.tzinfo is None:
        raise ValueError(f"give the instant's zone, e.g. a final Z: {text!r}")
    return at.astimezone(UTC)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("clock", "the suite with the real clock moved (tests/clock.py)")
    group.addoption("--clock-offset", default=None, help="move the clock by e.g. 400d or -36h")
    group.addoption("--clock-at", default=None, help="start the clock at e.g. 2027-01-31T23:59:59Z")


def _offset(config: pytest.Config) -> float | None:
    offset, at = config.getoption("clock_offset"), config.getoption("clock_at")
    if offset and at:
        raise pytest.UsageError("give --clock-offset or --clock-at, not both")
    try:
        if offset:
            return clock_offset_parse(offset).total_seconds()
        if at:
            return clock_at_parse(at).timestamp() - time.time()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from error
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(STARTED):
        return  # a child whose sitecustomize moved the clock already (an xdist worker)
    offset = _offset(config)
    if offset is None:
        return
    import time_machine

    os.environ[ENV] = repr(offset)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if SITE not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([SITE, *paths])
    traveller = time_machine.travel(time.time() + offset, tick=True)
    traveller.start()
    time.time()  # time-machine ticks from the first reading: anchor it now, as children do
    _traveller.append(traveller)


def pytest_report_header(config: pytest.Config) -> str | None:
    offset = os.environ.get(ENV)
    if offset is None:
        return None
    moved = datetime.now(UTC).isoformat(timespec="seconds")
    return f"clock: moved by {timedelta(seconds=float(offset))} to {moved} (tests/clock.py)"


def pytest_unconfigure(config: pytest.Config) -> None:
    while _traveller:
        _traveller.pop().stop()


@pytest.fixture
def moved_clock(time_machine):  # type: ignore[no-untyped-def]
    """time-machine's fixture under a name that leaves a module's ``import time_machine``
    usable: ``moved_clock.move_to(at, tick=True)`` moves this test's clock."""
    return time_machine
