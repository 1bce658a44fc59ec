-- Application log lines decoded by the `access_log` decoder:
--   2017-07-30 14:09:08 ERROR some message
-- The kafka_* columns record where each row came from; the ETL fills them.
CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (
  log_time timestamp COMMENT 'when the line was logged, as written in the line',
  level string COMMENT 'ERROR, WARN, INFO, ...',
  message string COMMENT 'the rest of the line',
  kafka_topic string,
  kafka_partition int,
  kafka_offset bigint,
  kafka_timestamp timestamp COMMENT 'the record timestamp (CreateTime or LogAppendTime)'
)
PARTITIONED BY (dt string, hour string)
-- No STORED AS: the table is stored as the job's [hive] format says (parquet, or orc).
LOCATION '${location}'
