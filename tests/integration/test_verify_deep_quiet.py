"""`etl verify --deep` says what it found and nothing of Hive's client internals: a metastore
client that reconnects (RetryingMetaStoreClient, after its transport was closed) printed a
46-line Java stack trace (`Cannot write to null outputStream`) before the OK line."""
from __future__ import annotations

import re

from tests.harness.data import loaded_job
from tests.harness.etl_process import etl_command

JAVA_NOISE = re.compile(r"RetryingMetaStoreClient|Cannot write to null outputStream|^\s+at [\w.$]+\(|^Caused by: ",
                        re.MULTILINE)


def test_verify_deep_prints_no_java_stack_trace(new_topic, produce, write_config):
    topic, config = loaded_job(new_topic, produce, write_config, partitions=2, per_partition=20)
    verified = etl_command(config, "verify", "--deep", timeout=300)
    assert verified.returncode == 0, verified.describe()
    output = verified.stdout + verified.stderr
    assert "OK" in verified.stdout, verified.stdout
    assert not JAVA_NOISE.search(output), output[-6000:]
