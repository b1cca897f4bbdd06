"""Which test runs where (README, "Tests"): the markers that split the suite into passes, and
what keeps pytest-xdist's workers apart. Loaded with ``-p tests.suite_plan`` (pyproject's
addopts), so it applies to every run however started.

Markers, set on a test or found here:

- ``every_database``: behaviour can differ by database (locks and races, transactions that
  commit, raw SQL, date truncation, JSON, collation and ordering, constraints, migrations).
  ``make test`` runs these on SQLite too; the rest run on PostgreSQL alone. A test that
  commits (``django_db(transaction=True)``) is marked so here, and so is every test of the
  modules in ``EVERY_DATABASE``. A test that commits only because it starts a real process
  (a live server, a browser, a Celery worker) runs on PostgreSQL alone: what it proves is the
  processes working together, and what could differ by database is proved by the database
  tests below it. ``SQLITE_END_TO_END`` names the few that run on SQLite too, so the embedded
  default (``make run``) is still driven end to end on its own database.
- ``process``: starts a real process or server (Celery workers, beat, ``live_server``, a
  browser, ``manage.py`` or a CLI subprocess). Left out of ``make test-fast``.
- ``slow``: worth its time in ``make test``, not in the inner loop (the fuzz tables).
- ``no_database``: found here, never set by hand: the test asks for no database. Nothing
  marked so may be ``every_database``: it would run twice for nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Whole modules whose behaviour can differ by database (see the module docstring). Per test,
# prefer @pytest.mark.every_database.
EVERY_DATABASE = {
    "api/test_api_approvals",  # approvals decided concurrently: row locks
    "api/test_api_tokens",  # token use counted with F() updates
    "billing/test_budget",  # month bounds: date truncation in SQL
    "billing/test_budget_alerts",
    "teams/test_entra_sync",  # memberships upserted: unique constraints
    "billing/test_figures",  # spend and usage summed in SQL (billing/live_sql.py)
    "workspaces/test_heartbeat",  # telemetry written with executemany, buffered flushes
    "workspaces/test_heartbeat_buffer",
    "workspaces/test_keep_running",
    "common/test_lists",  # filters, search and sort: collation, icontains, NULL ordering
    "common/test_org_lists",
    "portal/test_metrics",  # the scrape's spend figures: raw SQL
    "notifications/test_notifications_migration",  # models moved between apps: their tables kept
    "workspaces/test_operation_chains",
    "billing/test_pricing_reference",  # prices picked by date in SQL
    "workspaces/test_quota",  # quota held under a row lock
    "billing/test_reconciliation",
    "billing/test_recommendations",
    "billing/test_spend",
    "billing/test_spend_pages",
    "workspaces/test_states",  # compare-and-set transitions
    "workspaces/test_sweep",
    "teams/test_team_admin",
    "teams/test_team_group_migration",  # a data migration
    "workspaces/test_workspace_flow",
}
# Process tests (see the docstring) that run on SQLite too: the embedded default end to end.
SQLITE_END_TO_END = {
    "portal/test_demo",  # make run's demo data, processes and pages
    "portal/test_demo_run",
    "portal/test_beat_failover",  # beat's leader lock in the embedded default's database
    "browser/test_browser::test_researcher_runs_a_vm_through_its_whole_life",
    "live/test_live",  # open pages follow change stamps written by the worker
}
# Modules, or module::function, that start processes beyond what the fixtures below show.
PROCESS = {
    "agent/test_agent::test_once_runs_as_a_lone_file_without_nvidia_ml_py",
    "cloud/test_kube::test_the_pods_command_runs_the_agent_from_its_environment_then_the_image",
    "cloudsim/test_protocol::test_command_line_entry_point_serves_arm",
    "api/test_api_tokens::test_the_count_is_shared_between_worker_processes",
    "portal/test_metrics::test_the_alert_rules_pass_promtool",
    "teams/test_password_login::test_off_without_entra_sign_in_the_portal_refuses_to_start",
    "portal/test_beat_failover",  # two celery beat processes
    "portal/test_worker_crash",  # Celery workers killed mid-task
    "portal/test_production_settings",  # the settings module in fresh interpreters
    "portal/test_deploy_chart",  # helm template through the Go SDK, and the image's start command
}
# Modules, or module::function for one test function's every case.
SLOW = {
    "portal/test_fuzz",  # every URL with every hostile value
    # The RBAC table again with the roles from Entra ID sign-in; test_rbac_matrix stays fast.
    "portal/test_rbac_matrix::test_rbac_matrix_for_entra_id_sign_in",
    # Fifty threads racing for one GPU, twenty times: over a minute on PostgreSQL.
    "workspaces/test_quota::test_fifty_concurrent_requests_for_the_last_gpu_never_overshoot",
}
# One xdist worker runs all of a group (modules, or module::function as above).
XDIST_GROUPS = {
    # They share the run's Redis database (flushdb).
    "redis": {"portal/test_worker_crash"},
    # Fifty threads with a PostgreSQL connection each: two at once on two workers pass
    # PostgreSQL's default max_connections (100), "sorry, too many clients already".
    "fifty-connections": {
        "workspaces/test_quota::test_fifty_concurrent_requests_for_the_last_gpu_never_overshoot",
        "workspaces/test_resize_quota::test_fifty_concurrent_resizes_and_requests_never_overshoot_the_quota",
    },
}
PROCESS_FIXTURES = {"live_server", "celery_worker_thread", "page", "browser"}
PROCESS_MARKERS = {"browser", "celery_worker"}
DB_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "live_server"}


def _worker_var_dir() -> None:
    """Each xdist worker its own PORTAL_VAR_DIR (SQLite file, filesystem broker, cache,
    Prometheus files), set before the settings are read. xdist sets PYTEST_XDIST_WORKER before
    the worker loads its plugins, and processes the tests start inherit the folder."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or os.environ.get("PORTAL_TEST_WORKER_VAR") == worker:
        return
    base = Path(os.environ.get("PORTAL_VAR_DIR") or ROOT / "var")
    os.environ["PORTAL_VAR_DIR"] = str(base / f"xdist-{worker}")
    os.environ["PORTAL_TEST_WORKER_VAR"] = worker
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] += f"-{worker}"


_worker_var_dir()


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "every_database: behaviour can differ by database; make test runs it on SQLite too",
        "process: starts a real process, server or browser; not in make test-fast",
        "slow: long tables (fuzz); in make test, not in make test-fast",
        "no_database: set by tests/suite_plan.py for a test that asks for no database",
        "xdist_group(name): one xdist worker runs all tests of the group",
    ):
        config.addinivalue_line("markers", line)


def _uses_database(item: pytest.Item) -> bool:
    if item.get_closest_marker("django_db") or DB_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    from django.test import TransactionTestCase  # TestCase is one too

    cls = getattr(item, "cls", None)
    return bool(cls and issubclass(cls, TransactionTestCase))


def _listed(item: pytest.Item, names: set[str]) -> bool:
    """Whether ``names`` holds the item's module (``test_x``, or ``cloud/test_x`` under a
    folder) or its function (``test_x::test_y``)."""
    path = Path(str(item.fspath)).relative_to(ROOT / "tests").with_suffix("")
    module = path.as_posix()
    function = f"{module}::{getattr(item, 'originalname', item.name)}"
    return module in names or function in names


def _plan(item: pytest.Item) -> None:
    fixtures = set(getattr(item, "fixturenames", ()))
    markers = {m.name for m in item.iter_markers()}
    process = bool(
        _listed(item, PROCESS)
        or PROCESS_FIXTURES & fixtures
        or (PROCESS_MARKERS | {"process"}) & markers
    )
    if not _uses_database(item):
        item.add_marker(pytest.mark.no_database)
    elif _every_database(item, process):
        item.add_marker(pytest.mark.every_database)
    if process:
        item.add_marker(pytest.mark.process)
    if _listed(item, SLOW):
        item.add_marker(pytest.mark.slow)
    for group, names in XDIST_GROUPS.items():
        if _listed(item, names):
            item.add_marker(pytest.mark.xdist_group(group))


def _every_database(item: pytest.Item, process: bool) -> bool:
    if _listed(item, EVERY_DATABASE) or _listed(item, SQLITE_END_TO_END):
        return True
    db = item.get_closest_marker("django_db")
    return bool(db and db.kwargs.get("transaction")) and not process


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wasted = []
    for item in items:
        _plan(item)
        if item.get_closest_marker("no_database") and item.get_closest_marker("every_database"):
            wasted.append(item.nodeid)
    if wasted:
        raise pytest.UsageError(
            "marked every_database but asks for no database (it would run twice for "
            "nothing): " + ", ".join(wasted[:10])
        )
