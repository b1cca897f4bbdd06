"""The embedded default's run-time folder (PORTAL_VAR_DIR, ``var/``) kept private.

It holds the SQLite database (with the sessions: a readable copy lets any local user take a
login), the filesystem broker's messages, the file cache and the secret key. So the embedded
default's processes create files 0600 and folders 0700 (umask 077), and at start-up the folder
and everything already in it are narrowed to those modes (a var/ made by an older version, or
by ``mkdir`` in the Makefile). Deployments that are not embedded keep their own umask: their
database and broker are elsewhere, and their image sets its own modes (Containerfile).
"""

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077


def var_dir_make_private(var_dir: Path, *, leave: frozenset[str] = frozenset()) -> None:
    """Set the process's umask to 077 and narrow ``var_dir`` (made if missing) to 0700, every
    folder in it to 0700 and every file to 0600, leaving symbolic links and the top-level
    files named in ``leave`` alone (the secret key: portal/secret_key.py refuses a readable
    one, which may have been copied already). A file another user owns is left to fail at
    its first use, not here."""
    os.umask(PRIVATE_UMASK)
    var_dir.mkdir(parents=True, exist_ok=True)
    _narrow(var_dir, 0o700)
    for root, folders, files in os.walk(var_dir):
        for name in folders:
            _narrow(Path(root, name), 0o700)
        for name in files:
            if not (Path(root) == var_dir and name in leave):
                _narrow(Path(root, name), 0o600)


def _narrow(path: Path, mode: int) -> None:
    try:
        current = path.lstat()
        if stat.S_ISLNK(current.st_mode) or stat.S_IMODE(current.st_mode) & ~mode == 0:
            return
        path.chmod(stat.S_IMODE(current.st_mode) & mode)
    except OSError:  # gone meanwhile (a broker message taken), or not ours
        return
