"""The portal refuses to start with a SECRET_KEY anyone can know, the embedded default keeps a
key of its own in var/, and `check --deploy` with the documented production environment
(docs/operations.md) reports nothing. Each case starts Django in a subprocess, as gunicorn and
Celery would."""

import hashlib
import os
import re
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The constant the settings carried until the security review (issue 14): public, so refused.
PUBLISHED_KEY = "insecure-dev-only-key-set-SECRET_KEY-in-production"
PRODUCTION = {
    "DATABASE_URL": "postgres://portal@db.invalid:5432/portal",
    "CELERY_BROKER_URL": "redis://redis.invalid:6379/0",
    "ALLOWED_HOSTS": "gpu.example.org",
}
# Prints a digest of the key the settings chose, never the key.
PRINT_KEY_DIGEST = (
    "import hashlib, django; django.setup(); from django.conf import settings; "
    "print(hashlib.sha256(settings.SECRET_KEY.encode()).hexdigest(), len(settings.SECRET_KEY))"
)


def _run(args: list[str], env: dict, var_dir: Path) -> subprocess.CompletedProcess:
    """Run ``python <args>`` in the repository with only ``env`` (and PATH) set."""
    clean = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(var_dir),
        "PORTAL_VAR_DIR": str(var_dir),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        **env,
    }
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


UNSAFE_KEYS = {
    "unset": None,
    "published": PUBLISHED_KEY,
    "20 characters": "a1b2c3d4e5f6g7h8i9j0",
    "django-insecure": "django-insecure-" + secrets.token_urlsafe(50),
}


DEPLOYMENTS = {
    "production": PRODUCTION,
    "postgres": {"DATABASE_URL": PRODUCTION["DATABASE_URL"]},
    "public-host": {"ALLOWED_HOSTS": "gpu.example.org"},
}


@pytest.mark.parametrize("key", UNSAFE_KEYS.values(), ids=UNSAFE_KEYS.keys())
@pytest.mark.parametrize("deployment", DEPLOYMENTS.values(), ids=DEPLOYMENTS.keys())
def test_a_deployment_refuses_to_start_without_a_safe_secret_key(tmp_path, deployment, key):
    env = {**deployment, "DEBUG": "0"} | ({"SECRET_KEY": key} if key else {})
    result = _run(["manage.py", "check"], env, tmp_path)
    assert result.returncode != 0, result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: SECRET_KEY"), last


def test_the_published_key_is_refused_even_by_the_embedded_default(tmp_path):
    result = _run(["manage.py", "check"], {"SECRET_KEY": PUBLISHED_KEY}, tmp_path)
    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY" in result.stderr


def test_the_embedded_default_makes_its_own_key_once_and_keeps_it(tmp_path):
    first = _run(["-c", PRINT_KEY_DIGEST], {}, tmp_path)
    assert first.returncode == 0, first.stderr
    digest, length = first.stdout.split()
    assert digest != _digest(PUBLISHED_KEY)
    key_file = tmp_path / "secret_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert _digest(key_file.read_text().strip()) == digest and int(length) >= 50
    # A restart, or the Celery worker and beat started beside gunicorn, read the same key.
    assert _run(["-c", PRINT_KEY_DIGEST], {}, tmp_path).stdout.split()[0] == digest


def test_the_embedded_key_file_must_not_be_readable_by_others(tmp_path):
    assert _run(["-c", PRINT_KEY_DIGEST], {}, tmp_path).returncode == 0
    (tmp_path / "secret_key").chmod(0o644)
    result = _run(["-c", PRINT_KEY_DIGEST], {}, tmp_path)
    assert result.returncode != 0 and "chmod 600" in result.stderr


def test_a_safe_secret_key_is_used_as_given(tmp_path):
    key = secrets.token_urlsafe(50)
    result = _run(["-c", PRINT_KEY_DIGEST], {**PRODUCTION, "SECRET_KEY": key}, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == _digest(key)
    assert not (tmp_path / "secret_key").exists()


def _readme_production_env() -> dict[str, str]:
    """The ``env`` block of docs/operations.md's "Configuration (production)", as a dict."""
    readme = (ROOT / "docs" / "operations.md").read_text()
    section = readme.split("## Configuration (production)", 1)[1]
    block = re.search(r"```env\n(.*?)```", section, re.S)
    assert block, "docs/operations.md: no ```env block in Configuration (production)"
    lines = [line for line in block.group(1).splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_check_deploy_with_the_documented_production_env_reports_nothing(tmp_path):
    env = _readme_production_env()
    # The README's placeholder is not a key: copied as it is, the portal refuses to start.
    placeholder = _run(["manage.py", "check"], env, tmp_path)
    assert "ImproperlyConfigured: SECRET_KEY" in placeholder.stderr
    env["SECRET_KEY"] = secrets.token_urlsafe(50)
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_a_deployment_refuses_the_emulators_entra_client_secret(tmp_path):
    env = {**PRODUCTION, "SECRET_KEY": secrets.token_urlsafe(50)}
    entra = {
        "ENTRA_TENANT_ID": "t",
        "ENTRA_CLIENT_ID": "c",
        "ENTRA_CLIENT_SECRET": "demo-client-secret",
    }

    result = _run(["manage.py", "check"], env | entra, tmp_path)

    assert result.returncode != 0, result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: ENTRA_CLIENT_SECRET"), last
    assert "demo-client-secret" not in last  # The message names the variable, never the value.
    # A secret of the deployment's own starts; the embedded demo may use the emulator's.
    own = env | entra | {"ENTRA_CLIENT_SECRET": secrets.token_urlsafe(30)}
    assert _run(["manage.py", "check"], own, tmp_path).returncode == 0
    assert _run(["manage.py", "check"], entra, tmp_path).returncode == 0


PRINT_ENTRA = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.ENTRA_TENANT_ID or '-', s.ENTRA_AUTHORITY, bool(s.ENTRA_CLIENT_SECRET))"
)


def test_make_runs_entra_demo_reaches_only_the_embedded_default(tmp_path):
    # The Makefile's run target exports ENTRA_DEMO=1: the embedded demo signs in against the
    # emulator; a deployment that inherits the variable keeps sign-in off and still starts.
    demo = _run(["-c", PRINT_ENTRA], {"ENTRA_DEMO": "1", "CLOUDSIM_PORT": "8100"}, tmp_path)
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.split() == [
        "11111111-1111-1111-1111-111111111111",
        "http://127.0.0.1:8100",
        "True",
    ]
    env = {**PRODUCTION, "SECRET_KEY": secrets.token_urlsafe(50), "ENTRA_DEMO": "1"}
    deployed = _run(["-c", PRINT_ENTRA], env, tmp_path)
    assert deployed.returncode == 0, deployed.stderr
    assert deployed.stdout.split() == ["-", "https://login.microsoftonline.com", "False"]


# What a deployment that talks to Azure sets beyond PRODUCTION (portal/required_settings.py).
ON_AZURE = {
    **PRODUCTION,
    "CACHE_URL": "redis://redis.invalid:6379/1",
    "AZURE_ENDPOINT": "https://management.azure.com",
    "AZURE_SUBSCRIPTION_ID": "11111111-2222-3333-4444-555555555555",
}
REQUIRED_ON_AZURE = [
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "ALLOWED_HOSTS",
    "CACHE_URL",
    "AZURE_SUBSCRIPTION_ID",
]


@pytest.mark.parametrize("name", REQUIRED_ON_AZURE)
def test_a_deployment_on_azure_refuses_to_start_without_a_required_setting(tmp_path, name):
    env = {k: v for k, v in ON_AZURE.items() if k != name} | {
        "SECRET_KEY": secrets.token_urlsafe(50)
    }
    result = _run(["manage.py", "check"], env, tmp_path)
    assert result.returncode != 0, result.stdout
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"django.core.exceptions.ImproperlyConfigured: {name} must be set"), last
    assert not (tmp_path / "portal.sqlite3").exists()  # refused before anything was opened


def test_a_deployment_on_azure_with_every_required_setting_starts(tmp_path):
    env = ON_AZURE | {"SECRET_KEY": secrets.token_urlsafe(50)}
    result = _run(["manage.py", "check"], env, tmp_path)
    assert result.returncode == 0, result.stderr


def test_the_embedded_defaults_var_folder_is_private(tmp_path):
    """var/ holds the sessions (SQLite) and the broker's messages: no other local user may
    read them. Files made before (0644, 0755 by an older version) are narrowed too."""
    var = tmp_path / "var"
    (var / "broker" / "out").mkdir(parents=True)
    old = var / "broker" / "out" / "msg.json"
    old.write_text("{}")
    var.chmod(0o755), (var / "broker").chmod(0o755), old.chmod(0o644)
    touch_db = (
        "import django; django.setup(); from django.db import connection; "
        "connection.ensure_connection(); connection.cursor().execute('CREATE TABLE t (x int)')"
    )
    result = _run(["-c", touch_db], {}, var)
    assert result.returncode == 0, result.stderr

    def mode(path):
        return oct(stat.S_IMODE(path.stat().st_mode))

    assert mode(var) == "0o700"
    assert mode(var / "portal.sqlite3") == "0o600"
    assert {mode(p) for p in (var / "broker").rglob("*") if p.is_dir()} == {"0o700"}
    assert mode(var / "broker") == "0o700" and mode(old) == "0o600"
    assert mode(var / "secret_key") == "0o600"
