"""The moved-clock option (tests/clock.py): offsets parse, and a child process moves too."""

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from tests.clock import ENV, SITE, clock_at_parse, clock_offset_parse


@pytest.mark.parametrize(
    "text,delta",
    [
        ("400d", timedelta(days=400)),
        ("-36h", timedelta(hours=-36)),
        ("2w3d", timedelta(days=17)),
        ("+90m30s", timedelta(minutes=90, seconds=30)),
    ],
)
def test_an_offset_reads_as_written(text, delta):
    assert clock_offset_parse(text) == delta


@pytest.mark.parametrize("text", ["", "400", "d", "4 days", "400x"])
def test_an_offset_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError):
        clock_offset_parse(text)


def test_an_instant_needs_its_zone():
    assert clock_at_parse("2028-02-29T12:00:00Z") == datetime(2028, 2, 29, 12, tzinfo=UTC)
    with pytest.raises(ValueError):
        clock_at_parse("2028-02-29T12:00:00")


def test_a_child_process_reads_the_clock_moved_by_the_offset():
    env = {**os.environ, ENV: str(400 * 86400), "PYTHONPATH": SITE}
    env.pop("PORTAL_TEST_CLOCK_STARTED", None)
    code = "import time; print(time.time())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    moved = datetime.fromtimestamp(float(out.stdout), UTC)
    expected = datetime.now(UTC) + timedelta(days=400)
    if os.environ.get(ENV):  # this run is moved already: the child moves from the real clock
        expected -= timedelta(seconds=float(os.environ[ENV]))
    assert abs(moved - expected) < timedelta(seconds=30)
