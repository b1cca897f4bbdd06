"""The app proxy served by uvicorn in a thread (tests/apps_proxy/helpers.py)."""

import pytest

from tests.apps_proxy.helpers import serve_proxy


@pytest.fixture
def apps_proxy(settings, sim_server, transactional_db):
    with serve_proxy(settings, sim_server) as proxy:
        yield proxy
