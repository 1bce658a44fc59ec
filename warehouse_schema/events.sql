-- A generic JSON event table, decoded by the `json` decoder: each Kafka message is one
-- JSON object whose fields map to the columns below by name. Missing fields are NULL,
-- unknown fields are ignored. Used by the tests and as an example for new tables.
CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (
  event_id bigint,
  user_id string,
  action string,
  amount double,
  ts timestamp COMMENT 'ISO 8601, e.g. 2017-07-30 14:09:08.123 or 2017-07-30T14:09:08Z; zoned values are stored in UTC',
  ok boolean,
  kafka_topic string,
  kafka_partition int,
  kafka_offset bigint,
  kafka_timestamp timestamp COMMENT 'the record timestamp (CreateTime or LogAppendTime)'
)
PARTITIONED BY (dt string, hour string)
-- No STORED AS: the table is stored as the job's [hive] format says (parquet, or orc).
LOCATION '${location}'
