"""Hive's standalone metastores 3.1 and 4.0 as a cluster runs them: Apache's release tarballs
(scripts/stack/jvm/hive-metastores/pom.xml, unpacked by scripts/setup) on a PostgreSQL of the
test's own (Debian's server binaries, one cluster on loopback), schema-initialized by Hive's own
schema tool; and a Spark Thrift Server on such a metastore, the analysts' endpoint.

A release says what Spark needs to reach its metastore: nothing for 3.1 (Spark's built-in Hive
2.3 client speaks to it), Hive's 4.0.1 client for 4.0 (its Thrift API dropped `get_table`, which
the 2.3 client calls), from scripts/stack/jvm/hive-client-4.0/pom.xml, as docs/cluster.md says.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.etl_process import die_with_us
from tests.harness.paths import REPO
from tests.harness.postgres import PrivatePostgres
from tests.harness.services import _Service

STACK = REPO / ".stack"
# The releases unpacked, next to the PostgreSQL driver and commons-collections 3 (on the classpath).
RELEASES_DIR = EXTRA_JARS = STACK / "jars" / "hive-metastores"
HADOOP_JARS = STACK / "jars" / "hadoop"
HIVE_4_CLIENT_JARS = STACK / "jars" / "hive-client-4.0"
LOGGING = f"-Dlog4j.configurationFile={REPO / 'conf' / 'log4j2.properties'}"


@dataclass(frozen=True)
class HiveRelease:
    version: str
    schema_tool: str  # the schema tool's main class (it moved in 4.0)
    spark_settings: dict[str, str] = field(default_factory=dict)  # what Spark needs to reach it

    @property
    def home(self) -> Path:
        return RELEASES_DIR / f"apache-hive-metastore-{self.version}-bin"

    @property
    def cell(self) -> str:
        return "hive-" + ".".join(self.version.split(".")[:2])


HIVE_3_1 = HiveRelease("3.1.3", "org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool")
HIVE_4_0 = HiveRelease("4.0.1", "org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool", {
    "spark.sql.hive.metastore.version": "4.0.1",
    "spark.sql.hive.metastore.jars": "path",
    "spark.sql.hive.metastore.jars.path": f"file://{HIVE_4_CLIENT_JARS}/*.jar",
})


class StandaloneMetastore(_Service):
    """A Hive metastore of `release` on its own database of `postgres`, initialized by Hive's
    schema tool on first start. Hive 4 binds `metastore.thrift.bind.host`; Hive 3.1 reads the
    setting but listens on every interface, as the tests' Hive 2.3 metastores do."""

    name = "metastore"
    what = "Hive metastore"

    def __init__(self, workdir: Path, release: HiveRelease, postgres: PrivatePostgres):
        super().__init__(workdir)
        if not (release.home / "lib").is_dir():
            raise RuntimeError(f"no Hive {release.version} metastore in {release.home}; run scripts/setup --tests")
        self.release = release
        self.conf = self.workdir / "conf"
        self.conf.mkdir(exist_ok=True)
        self.database = f"metastore_{release.version.replace('.', '_')}_{self.port}"  # its schema's, in PostgreSQL
        url = postgres.create_database(self.database)
        settings = {
            "javax.jdo.option.ConnectionURL": url,
            "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
            "javax.jdo.option.ConnectionUserName": postgres.user,
            "javax.jdo.option.ConnectionPassword": "",
            "metastore.warehouse.dir": f"file://{self.workdir}/warehouse",
            "metastore.thrift.port": str(self.port),
            "metastore.thrift.bind.host": "127.0.0.1",
            "metastore.expression.proxy": "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy",
            "metastore.task.threads.always": "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
        }
        (self.conf / "metastore-site.xml").write_text(
            "<configuration>\n" + "".join(f"  <property><name>{k}</name><value>{v}</value></property>\n"
                                          for k, v in settings.items()) + "</configuration>\n")
        self._initialize_schema()

    def _classpath(self) -> str:
        return f"{self.conf}:{self.release.home}/lib/*:{EXTRA_JARS}/*:{HADOOP_JARS}/*"

    def _initialize_schema(self) -> None:
        done = subprocess.run(die_with_us(["java", "-Xmx256m", LOGGING, "-cp", self._classpath(),
                                           self.release.schema_tool, "-initSchema", "-dbType", "postgres"]),
                              capture_output=True, text=True,
                              env={**os.environ, "METASTORE_HOME": str(self.release.home)}, timeout=300)
        if done.returncode != 0 or "Initialization script completed" not in done.stdout + done.stderr:
            raise RuntimeError(f"Hive {self.release.version}'s schema tool failed (rc {done.returncode}):\n"
                               f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")

    def command(self) -> list[str]:
        return ["java", "-Xmx384m", LOGGING, "-cp", self._classpath(), "org.apache.hadoop.hive.metastore.HiveMetaStore"]

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"


class PrivateThriftServer(_Service):
    """The Spark Thrift Server (HiveServer2) on a metastore of the test's own, with what Spark
    needs to reach it: the analysts' endpoint, started as scripts/stack/thriftserver.sh starts
    the shared one."""

    name = "thriftserver"
    what = "Spark Thrift Server"

    def __init__(self, workdir: Path, metastore: StandaloneMetastore):
        super().__init__(workdir)
        self.metastore = metastore

    def command(self) -> list[str]:
        import pyspark
        settings = {
            "spark.ui.enabled": "false", "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1",
            "spark.sql.shuffle.partitions": "2", "spark.sql.hive.filesourcePartitionFileCacheSize": "0",
            "spark.sql.warehouse.dir": f"file://{self.workdir}/warehouse",
            "spark.hadoop.hive.metastore.uris": self.metastore.uri,
            "spark.hadoop.hive.server2.thrift.bind.host": "127.0.0.1",
            "spark.hadoop.hive.server2.thrift.port": str(self.port),
            "spark.hadoop.hive.server2.logging.operation.log.location": f"{self.workdir}/operation_logs",
            "spark.hadoop.hive.exec.local.scratchdir": f"{self.workdir}/scratch",
            **self.metastore.release.spark_settings,
        }
        submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        return [str(submit), "--master", "local[1]", "--driver-memory", "512m",
                *[arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")],
                "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2", "spark-internal"]

    @property
    def url(self) -> str:
        return f"jdbc:hive2://127.0.0.1:{self.port}/default"
