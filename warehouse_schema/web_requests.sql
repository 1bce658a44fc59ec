-- Web requests as JSON events, the worked example of enrichment and a custom transform
-- (conf/web_requests.ini):
--   {"log_time": "2017-07-30 14:09:08", "client_ip": "81.2.69.160", "method": "GET",
--    "path": "/", "status": 200}
-- status_text comes from [dimension http_status] (a lookup on status); minute and country
-- are filled by the transform etl.examples:minute_and_country. Neither is read from the
-- message. The kafka_* columns record where each row came from; the ETL fills them.
CREATE EXTERNAL TABLE IF NOT EXISTS ${database}.${table} (
  log_time timestamp COMMENT 'when the request was served',
  client_ip string,
  method string,
  path string,
  status int,
  status_text string COMMENT 'the reason phrase of status, from [dimension http_status]; NULL if unknown',
  minute timestamp COMMENT 'log_time truncated to the minute (transform)',
  country string COMMENT 'country of client_ip from [dimension ip_ranges] (transform); NULL if unknown',
  kafka_topic string,
  kafka_partition int,
  kafka_offset bigint,
  kafka_timestamp timestamp COMMENT 'the record timestamp (CreateTime or LogAppendTime)'
)
PARTITIONED BY (dt string, hour string)
-- No STORED AS: the table is stored as the job's [hive] format says (parquet, or orc).
LOCATION '${location}'
