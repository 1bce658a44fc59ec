# Sourced by scripts/local-stack: a Spark standalone cluster, an optional service
# (`scripts/local-stack up spark`): a Master and two Workers of pyspark's own jars, run by
# scripts/stack/spark-node (their settings are there), on loopback, each Worker 1 core. Their
# logs and work folders live in .stack/spark. A bare `up` leaves it alone: few tests need it.

SPARK_SERVICES=(sparkmaster sparkworker1 sparkworker2)  # started in this order, stopped in reverse

start_sparkmaster() { launch sparkmaster "$ROOT/scripts/stack/spark-node" master "$STACK/spark" "$SPARK_MASTER_PORT" "$SPARK_MASTER_UI_PORT"; }
start_sparkworker1() { launch sparkworker1 "$ROOT/scripts/stack/spark-node" worker "$STACK/spark" "$SPARK_MASTER_PORT" "$SPARK_WORKER1_UI_PORT"; }
start_sparkworker2() { launch sparkworker2 "$ROOT/scripts/stack/spark-node" worker "$STACK/spark" "$SPARK_MASTER_PORT" "$SPARK_WORKER2_UI_PORT"; }

# The Worker whose web UI is on port $1 is registered with the Master and ALIVE (the Master's
# /json/ lists it): a Worker's open port alone does not say the Master will give it executors.
spark_worker_alive() {
  curl -sf --max-time 2 "http://127.0.0.1:$SPARK_MASTER_UI_PORT/json/" 2>/dev/null | "$PY" -c '
import json, sys
workers = json.load(sys.stdin)["workers"]
sys.exit(not any(w["state"] == "ALIVE" and w["webuiaddress"].endswith(":" + sys.argv[1]) for w in workers))' "$1"
}

spark_running() { pid_of sparkmaster >/dev/null; }

spark_env() { echo "ETL_SPARK_MASTER_URL=spark://127.0.0.1:$SPARK_MASTER_PORT"; }
