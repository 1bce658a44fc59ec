"""Hive: the Spark session (started here, once), tables and partitions, schema evolution."""
