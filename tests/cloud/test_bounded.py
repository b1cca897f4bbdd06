"""cloud.bounded: calls a web request waits for run in a few slots with a deadline."""

import threading
import time

import pytest

from cloud.bounded import CloudBusy, CloudTimeout, RequestPool


def test_a_full_pool_refuses_at_once_and_a_slot_frees_only_when_its_call_ends():
    pool, release = RequestPool(1), threading.Event()
    with pytest.raises(CloudTimeout):
        pool.run(release.wait, deadline=0.2)  # the caller stops waiting; the call goes on
    started = time.monotonic()
    with pytest.raises(CloudBusy) as busy:
        pool.run(lambda: "never", deadline=5)
    assert time.monotonic() - started < 0.1 and busy.value.retry_after == 5
    release.set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            assert pool.run(lambda: "answer", deadline=5) == "answer"
            break
        except CloudBusy:
            time.sleep(0.01)
    else:
        raise AssertionError("the slot was never freed")


def test_what_the_call_raises_reaches_the_caller():
    def fails():
        raise ValueError("bad name")

    with pytest.raises(ValueError, match="bad name"):
        RequestPool(2).run(fails, deadline=5)
