-- The companion table <table>_rejected: records the decoder could not turn into a row,
-- kept byte for byte with the reason, so that nothing read from Kafka is silently lost.
-- Its columns are fixed by the ETL (etl.model.schema.rejected_arrow_schema); do not edit them.
CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (
  kafka_topic string,
  kafka_partition int,
  kafka_offset bigint,
  kafka_timestamp timestamp,
  kafka_key binary COMMENT 'NULL when the record had no key',
  raw_value binary COMMENT 'the message exactly as read from Kafka',
  error string COMMENT 'why the record was rejected',
  kafka_timestamp_ms bigint COMMENT 'the record timestamp as Kafka gave it, in ms since 1970 (-1: none); kafka_timestamp is NULL where Hive could not read it back'
)
PARTITIONED BY (dt string, hour string)
STORED AS PARQUET
LOCATION '${location}'
