"""The enriched table and the countries dimension that the enrichment tests share (unit and job)."""
from __future__ import annotations

from pathlib import Path

LINEAGE_SQL = "kafka_topic string, kafka_partition int, kafka_offset bigint, kafka_timestamp timestamp"


ENRICHED_DDL = ("CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (event_id bigint, user_id string, "
                f"country_code string, country_name string, user_tier string, {LINEAGE_SQL}) "
                "PARTITIONED BY (dt string, hour string) LOCATION '${location}'")


COUNTRIES_CSV = "code,country_name\nDE,Germany\nFR,France\n"


def enriched_schema(tmp_path: Path) -> Path:
    path = tmp_path / "enriched.sql"
    path.write_text(ENRICHED_DDL)
    return path


def countries_csv(tmp_path: Path, text: str = COUNTRIES_CSV) -> Path:
    path = tmp_path / "countries.csv"
    path.write_text(text)
    return path
