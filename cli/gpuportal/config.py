"""Where the CLI keeps the portal's URL and the user's token, and how it finds them.

The file is ``<config dir>/config.json``, ``{"url": str, "token": str}``, where the config dir is
``typer.get_app_dir("gpuportal")`` ($XDG_CONFIG_HOME/gpuportal, else ~/.config/gpuportal on
Linux). The environment wins over the file: GPUPORTAL_URL and GPUPORTAL_TOKEN, for pipelines.
"""

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import typer

APP_NAME = "gpuportal"
FILE_NAME = "config.json"
URL_ENV = "GPUPORTAL_URL"
TOKEN_ENV = "GPUPORTAL_TOKEN"


@dataclass(frozen=True)
class Credentials:
    """The portal's base URL (no trailing slash) and the bearer token sent to it."""

    url: str
    token: str


def config_path() -> Path:
    """The config file's path; it may not exist yet."""
    return Path(typer.get_app_dir(APP_NAME)) / FILE_NAME


def normalise_url(url: str) -> str:
    """``url`` without surrounding blanks and trailing slashes; "" stays ""."""
    return url.strip().rstrip("/")


def credentials_save(creds: Credentials) -> Path:
    """Write ``creds`` to the config file and return its path.

    The file is created with mode 0600 from its first byte (a temporary file opened 0600 in the
    same directory, then renamed over the old one), so the token is never readable by others,
    not even for a moment, and an old file with a looser mode is replaced, not reused. The
    directory is created 0700 when missing. Raises OSError when it cannot be written."""
    path = config_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkstemp opens O_CREAT | O_EXCL with mode 0600 (the umask can only take bits away).
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"url": creds.url, "token": creds.token}, out)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def credentials_forget() -> bool:
    """Delete the config file; True when there was one."""
    path = config_path()
    if not path.exists():
        return False
    path.unlink()
    return True


def _stored() -> dict[str, str]:
    try:
        data = json.loads(config_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def credentials_load() -> Credentials | None:
    """The credentials to use: each of url and token from the environment when set there,
    else from the config file. None when either is missing (the user is not signed in)."""
    stored = _stored()
    url = normalise_url(os.environ.get(URL_ENV) or stored.get("url", ""))
    token = (os.environ.get(TOKEN_ENV) or stored.get("token", "")).strip()
    if not url or not token:
        return None
    return Credentials(url=url, token=token)
