"""Exactly-once ETL from Kafka topics into Hive tables, on Spark."""
__version__ = "0.1.0"
