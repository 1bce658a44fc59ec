"""The example alert rules and Prometheus config in deploy/prometheus, and the Grafana dashboard
in deploy/grafana: promtool accepts the rules, the config and every dashboard expression; its
rule tests show each alert firing on the series meant to raise it, and only there; every alert
links a section of docs/operating.md that exists; every metric they name is one that is published."""
import json
import re
import subprocess

import pytest

from tests.harness.paths import REPO
from tests.harness.prometheus import PROMTOOL, missing_binaries

DEPLOY = REPO / "deploy" / "prometheus"
DASHBOARD = REPO / "deploy" / "grafana" / "etl-dashboard.json"
# Grafana's variables in the dashboard's expressions, and a value of each that PromQL parses.
GRAFANA_VARIABLES = {"$etl_job": ".+", "$__rate_interval": "5m", "$__interval": "1m", "$__range": "1d"}

pytestmark = pytest.mark.skipif(bool(missing_binaries()), reason=f"not installed: {missing_binaries()} "
                                                                 f"(scripts/setup --tests installs them)")


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
    rules = rules.replace("etl_last_run_exit_code == 1 or etl_last_run_exit_code == 2", "etl_last_run_exit_code == 100")
    rules = rules.replace('absent(etl_last_success_timestamp_seconds{etl_job="clicks"})', "absent(vector(1))")
    (tmp_path / "etl-alerts.yml").write_text(rules)
    (tmp_path / "etl-alerts-test.yml").write_text((DEPLOY / "etl-alerts-test.yml").read_text())
    result = subprocess.run([PROMTOOL, "test", "rules", "etl-alerts-test.yml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0
    for alert in ("EtlNoSuccess", "EtlRejectedRatioHigh", "EtlRunNeedsOperator", "EtlJobNeverSucceeded"):
        assert alert in result.stdout + result.stderr


def dashboard_expressions() -> list[str]:
    """Every `expr` anywhere in the dashboard's JSON (panels, rows, targets)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            found.extend(value for key, value in node.items() if key == "expr")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(json.loads(DASHBOARD.read_text()))
    return found


def as_promql(expression: str) -> str:
    for variable, value in sorted(GRAFANA_VARIABLES.items(), key=lambda item: -len(item[0])):
        expression = expression.replace(variable, value)
    assert "$" not in expression, f"a Grafana variable this test does not know: {expression}"
    return expression


def check_as_recording_rules(expressions: list[str], folder) -> subprocess.CompletedProcess:
    """promtool parses a rule file's every expression: each one becomes a recording rule."""
    rules = "groups:\n  - name: dashboard\n    rules:\n" + "".join(
        f"      - record: dashboard:expr_{i}\n        expr: {json.dumps(expression)}\n"
        for i, expression in enumerate(expressions))
    (folder / "dashboard-rules.yml").write_text(rules)
    return subprocess.run([PROMTOOL, "check", "rules", "dashboard-rules.yml"], cwd=folder, capture_output=True,
                          text=True, timeout=60)


def test_every_dashboard_expression_parses(tmp_path):
    expressions = [as_promql(e) for e in dashboard_expressions()]
    assert len(expressions) >= 15
    result = check_as_recording_rules(expressions, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(expressions)} rules found" in result.stdout


def test_the_dashboard_check_can_fail(tmp_path):
    result = check_as_recording_rules(["sum(rate(etl_rows_total[5m])", "etl_rows_total"], tmp_path)
    assert result.returncode != 0 and "dashboard-rules.yml" in result.stdout + result.stderr


def documented_metrics() -> set[str]:
    text = (REPO / "docs" / "monitoring.md").read_text()
    return set(re.findall(r"^\| `(etl_[a-z_]+)` \| (?:gauge|counter) \|", text, re.M))


def test_the_rules_and_the_dashboard_name_only_published_metrics():
    """A renamed metric left in an alert or a panel would be silently empty."""
    texts = [*dashboard_expressions(), (DEPLOY / "etl-alerts.yml").read_text(),
             (DEPLOY / "etl-alerts-test.yml").read_text()]
    named = {name for text in texts for name in re.findall(r"\b(etl_[a-z_]+)\b", text)} - {"etl_job"}
    assert named and named <= documented_metrics(), named - documented_metrics()


def heading_anchors(page) -> set[str]:
    """GitHub's anchors: lower case, punctuation but - and _ dropped, spaces to -."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in page.read_text().splitlines() if line.startswith("#")}


def test_every_alert_has_a_runbook_url_to_a_section_of_operating_md():
    blocks = (DEPLOY / "etl-alerts.yml").read_text().split("- alert: ")[1:]
    anchors = heading_anchors(REPO / "docs" / "operating.md")
    assert len(blocks) == 7
    for block in blocks:
        urls = re.findall(r'runbook_url: "([^"]+)"', block)
        assert len(urls) == 1, f"alert {block.split()[0]} has no runbook_url"
        page, _, anchor = urls[0].partition("#")
        assert page.endswith("/docs/operating.md") and anchor in anchors, (block.split()[0], urls[0])
