"""The example alert rules and Prometheus config in deploy/prometheus: promtool accepts them,
and its rule tests show each alert firing on the series meant to raise it, and only there."""
import subprocess

import pytest

from tests.harness.paths import REPO
from tests.harness.prometheus import PROMTOOL, missing_binaries

DEPLOY = REPO / "deploy" / "prometheus"

pytestmark = pytest.mark.skipif(bool(missing_binaries()), reason=f"not installed: {missing_binaries()} "
                                                                 f"(scripts/setup installs them)")


def promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], cwd=DEPLOY, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args", [("check", "rules", "etl-alerts.yml"), ("test", "rules", "etl-alerts-test.yml"),
                                  ("check", "config", "prometheus.yml")])
def test_promtool_accepts(args):
    result = promtool(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_rule_tests_can_fail(tmp_path):
    """The same rule tests against rules whose thresholds never trip: promtool must report them."""
    rules = (DEPLOY / "etl-alerts.yml").read_text().replace("> 60 * 60", "> 1e12").replace("> 0.01", "> 2")
    (tmp_path / "etl-alerts.yml").write_text(rules)
    (tmp_path / "etl-alerts-test.yml").write_text((DEPLOY / "etl-alerts-test.yml").read_text())
    result = subprocess.run([PROMTOOL, "test", "rules", "etl-alerts-test.yml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0
    assert "EtlNoSuccess" in result.stdout + result.stderr and "EtlRejectedRatioHigh" in result.stdout + result.stderr
