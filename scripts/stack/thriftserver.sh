# Sourced by scripts/local-stack: the Spark Thrift Server (HiveServer2 protocol), started
# only once the metastore answers (scripts/stack/verbs.sh checks it).

# The analysts' SQL endpoint: Spark's HiveServer2 on the shared metastore, so it sees the
# tables and partitions the ETL registers. Run from .stack/thriftserver, where Spark and Hive
# put their scratch files (no spark-warehouse/ or derby.log in the repo).
# filesourcePartitionFileCacheSize=0: Spark otherwise caches each partition's file listing
# per JDBC session, and a session that already read an hour partition would not see the
# files the ETL commits into it later (checked: 20 rows stayed 20 after a batch added 10).
# New partitions, new columns and new sessions were seen without it; with it, every query
# lists the partitions' folders again, so no REFRESH TABLE is ever needed.
start_thriftserver() {
  local pyspark_dir dir=$STACK/thriftserver
  pyspark_dir=$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
  mkdir -p "$dir" "$STACK/hive-warehouse"
  launch thriftserver bash -c 'cd "$0" && exec "$@"' "$dir" \
    "$pyspark_dir/bin/spark-submit" --master 'local[1]' --driver-memory 1g \
    --conf spark.ui.enabled=false \
    --conf spark.driver.bindAddress=127.0.0.1 --conf spark.driver.host=127.0.0.1 \
    --conf spark.sql.shuffle.partitions=4 \
    --conf spark.sql.hive.filesourcePartitionFileCacheSize=0 \
    --conf "spark.sql.warehouse.dir=file://$STACK/hive-warehouse" \
    --conf "spark.driver.extraJavaOptions=-Dderby.stream.error.file=$dir/derby.log" \
    --conf "spark.hadoop.hive.metastore.uris=thrift://127.0.0.1:$METASTORE_PORT" \
    --conf spark.hadoop.hive.server2.thrift.bind.host=127.0.0.1 \
    --conf "spark.hadoop.hive.server2.thrift.port=$THRIFT_PORT" \
    --conf "spark.hadoop.hive.server2.logging.operation.log.location=$dir/operation_logs" \
    --conf "spark.hadoop.hive.exec.local.scratchdir=$dir/scratch" \
    --conf "spark.hadoop.hive.downloaded.resources.dir=$dir/resources" \
    --class org.apache.spark.sql.hive.thriftserver.HiveThriftServer2 spark-internal
}
