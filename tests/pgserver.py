"""A throwaway PostgreSQL server on loopback, for the tests and the benchmarks."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def postgres_bin() -> Path | None:
    """Where PostgreSQL's server programs are: on PATH, else Debian's versioned folder."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """Start a server in a temporary folder, yield its SQLAlchemy URL, then stop it and remove the folder.

    PostgreSQL refuses to run as root, so as root it runs as ``postgres``.

    Raises:
        RuntimeError: When PostgreSQL is not installed or does not start.
    """
    import psycopg

    bin_dir = postgres_bin()
    if bin_dir is None:
        msg = "PostgreSQL is not installed (no initdb found); install Debian's postgresql"
        raise RuntimeError(msg)
    home = Path(tempfile.mkdtemp(prefix="lcx-postgres-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(home, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = home / "data", _free_port()
    subprocess.run(
        [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
        check=True,
        capture_output=True,
    )
    log = (home / "server.log").open("w")
    options = ["-D", str(data), "-k", str(home), "-h", "127.0.0.1", "-p", str(port), "-c", "fsync=off"]
    server = subprocess.Popen(
        [*as_user, str(bin_dir / "postgres"), *options],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres").close()
                break
            except psycopg.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("PostgreSQL did not start:\n" + (home / "server.log").read_text()) from None
                time.sleep(0.2)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
        shutil.rmtree(home, ignore_errors=True)
