"""PostgreSQL from Debian's packages, for the tests that need it and only while they run: the
local stack's (`scripts/local-stack up postgres`), a rollup's target in
tests/integration/test_rollups.py; and a cluster of a test's own, the Hive metastores' database
(tests/harness/hive_metastores.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.harness.paths import REPO
from tests.harness.services import _Service

LOCAL_STACK = REPO / "scripts" / "local-stack"


class StackPostgres:
    """The local stack's PostgreSQL, started on entering (if it is not running) and stopped on
    leaving; each test makes a database of its own in it."""

    user = "etl"

    def __enter__(self) -> "StackPostgres":
        done = subprocess.run([str(LOCAL_STACK), "up", "postgres"], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"scripts/local-stack up postgres failed:\n{done.stdout}\n{done.stderr}")
        env = dict(line.split("=", 1) for line in (REPO / ".stack" / "env").read_text().splitlines() if "=" in line)
        self.port = int(env["ETL_POSTGRES_URL"].rsplit(":", 1)[1].split("/", 1)[0])
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        subprocess.run([str(LOCAL_STACK), "down", "postgres"], capture_output=True, check=True)

    def start(self) -> None:
        self.__enter__()

    def create_database(self, name: str) -> str:
        """A new database; its URL."""
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", "postgres",
                        "-v", "ON_ERROR_STOP=1", "-c", f'CREATE DATABASE "{name}"'], check=True, capture_output=True)
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{name}"


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run `command` as Debian's postgres user."""
    if os.geteuid() != 0:
        return command
    return ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--clear-groups", "--", *command]


def _postgres_bin() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if not versions:
        raise RuntimeError("no PostgreSQL server in /usr/lib/postgresql; run scripts/setup --tests")
    return versions[-1].parent


class PrivatePostgres(_Service):
    """A PostgreSQL cluster of the test's own in the foreground, on loopback, trust
    authentication for its one user `hive`. Its data lives in a folder of /tmp the postgres user
    can reach (pytest's are root's alone), removed on stop."""

    name = "postgres"
    what = "PostgreSQL"
    user = "hive"

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        self.data = Path(tempfile.mkdtemp(prefix="etl-postgres-"))
        if os.geteuid() == 0:
            shutil.chown(self.data, "postgres", "postgres")
        self.bin = _postgres_bin()
        subprocess.run(_as_postgres([str(self.bin / "initdb"), "-D", str(self.data / "db"), "-U", self.user,
                                     "--auth=trust", "-E", "UTF8"]), check=True, capture_output=True)

    def command(self) -> list[str]:
        return _as_postgres([str(self.bin / "postgres"), "-D", str(self.data / "db"), "-p", str(self.port),
                             "-k", str(self.data), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])

    def create_database(self, name: str) -> str:
        """A new database; its JDBC URL."""
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", "postgres",
                        "-v", "ON_ERROR_STOP=1", "-c", f'CREATE DATABASE "{name}"'], check=True, capture_output=True)
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self.data, ignore_errors=True)
