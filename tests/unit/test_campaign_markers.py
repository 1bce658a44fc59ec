"""The kill campaigns (tests/harness/campaign.py) time half their kills from, and classify every
kill by, lines of the job's own DEBUG log. Each line they wait for must be one the job still
logs: when the Spark start's line changed its wording, the batch-anchored runs waited for a line
that never came, ran to their end unkilled, and the campaigns' kills all came from the other
half (and took a whole run longer for each miss)."""
import ast
from pathlib import Path

import pytest

from tests.harness import campaign

ETL = Path(__file__).resolve().parents[2] / "etl"
_LEVELS = {"debug", "info", "warning", "error"}


def logged_formats() -> list[str]:
    """The format string of every log call in etl/ (log.debug("...", ...) and the like)."""
    formats = []
    for module in ETL.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _LEVELS
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                formats.append(node.args[0].value)
    return formats


@pytest.mark.parametrize("marker", [campaign.ZK_CONNECTED, campaign.SPARK_STARTED], ids=["zookeeper", "spark"])
def test_each_line_a_campaign_waits_for_is_one_the_job_logs(marker):
    assert any(marker in fmt for fmt in logged_formats()), f"no log call in etl/ says {marker!r}"
