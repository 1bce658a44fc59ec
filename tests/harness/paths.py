"""Files of this repository the harness points the job at."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EVENTS_SCHEMA = REPO / "warehouse_schema" / "events.sql"
HIVE_WAREHOUSE = REPO / ".stack" / "hive-warehouse"  # the shared metastore's default location
ETL = str(Path(sys.executable).with_name("etl"))  # the venv's `etl` command
