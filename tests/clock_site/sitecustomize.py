"""Moves a child process's clock as tests/clock.py moved the test run's: the offset in seconds
is in PORTAL_TEST_CLOCK. Python imports this at start-up because the plugin put this folder
first on PYTHONPATH; without the variable it does nothing."""

import os

_offset = os.environ.get("PORTAL_TEST_CLOCK")
if _offset:
    import time

    import time_machine

    time_machine.travel(time.time() + float(_offset), tick=True).start()
    time.time()  # time-machine ticks from the first reading: anchor it at start, as the parent
    os.environ["PORTAL_TEST_CLOCK_STARTED"] = "1"
