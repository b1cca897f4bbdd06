"""Exit 0 when the PostgreSQL and Redis named by the URLs in argv answer within 2 s, else 1."""

import socket
import sys
from urllib.parse import urlsplit


def answers(url: str) -> bool:
    parts = urlsplit(url)
    default = {"postgres": 5432, "postgresql": 5432, "redis": 6379}[parts.scheme]
    try:
        with socket.create_connection((parts.hostname, parts.port or default), timeout=2):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(0 if all(answers(u) for u in sys.argv[1:]) else 1)
