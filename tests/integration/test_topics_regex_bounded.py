"""[kafka] topics_regex on the real stack cannot hang a command: a backtracking pattern and a
topic that is a long near miss of it (issue 26, defect 8), and a pattern that names Kafka's
internal topics says that it never loads them (issue 26, LOW)."""
from __future__ import annotations

import json
import uuid

from tests.harness.etl_process import etl_command


def test_status_with_a_backtracking_regex_and_a_near_miss_topic_ends_and_lists_what_it_matched(
        new_topic, write_config):
    """Python's re needs 2**34 steps for this name; `etl status` ran at 100% CPU with no output.
    The timeout only guards the test from hanging: the assertions are on the outcome."""
    base = f"rt_redos_{uuid.uuid4().hex[:8]}_"
    near_miss = new_topic(1, base + "a" * 34 + "-")
    matched = new_topic(1, base + "aaa")
    internal = new_topic(1, f"__rt_internal_{uuid.uuid4().hex[:8]}")
    config = write_config(kafka={"topics_regex": f"{base}(a+)+|{internal}"})
    done = etl_command(config, "status", "--json", timeout=180)
    assert done.returncode == 0, done.describe()
    status = json.loads(done.stdout)
    not_loaded = {t["topic"]: t["reason"] for t in status["topics_not_loaded"]}
    assert not_loaded == {internal: "internal"}
    assert near_miss not in done.stdout and matched in done.stdout
    assert f"matches {internal}, Kafka's internal topics, which the job never loads" in done.stderr
