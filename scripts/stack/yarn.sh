# Sourced by scripts/local-stack: YARN, an optional service (`scripts/local-stack up yarn`): a
# ResourceManager and one NodeManager of Hadoop's own jars, run by scripts/stack/yarn-node (their
# settings are there), on loopback, over the shared HDFS (which `up yarn` starts first when it
# is not running). Their logs, the containers' folders and conf-client (the HADOOP_CONF_DIR of a
# spark-submit --master yarn) live in .stack/yarn. A bare `up` leaves it alone.

YARN_SERVICES=(resourcemanager nodemanager)  # started in this order, stopped in reverse

yarn_node() {
  launch "$1" "$ROOT/scripts/stack/yarn-node" "$1" "$STACK/yarn" "hdfs://127.0.0.1:$HDFS_PORT" "$YARN_RM_PORT" \
    "$YARN_RM_WEB_PORT" "${@:2}"
}
start_resourcemanager() { yarn_node resourcemanager; }
start_nodemanager() { yarn_node nodemanager "$YARN_NM_PORT" "$YARN_NM_LOCALIZER_PORT" "$YARN_NM_WEB_PORT"; }

# The NodeManager is registered and RUNNING in the ResourceManager's REST view: its open port
# alone does not say the ResourceManager will give it containers.
yarn_node_running() {
  curl -sf --max-time 2 "http://127.0.0.1:$YARN_RM_WEB_PORT/ws/v1/cluster/nodes" 2>/dev/null | "$PY" -c '
import json, sys
nodes = (json.load(sys.stdin).get("nodes") or {}).get("node", [])
sys.exit(not any(n["state"] == "RUNNING" and n["id"].endswith(":" + sys.argv[1]) for n in nodes))' "$YARN_NM_PORT"
}

yarn_running() { pid_of resourcemanager >/dev/null; }

yarn_env() {
  cat <<EOF2
ETL_YARN_CONF_DIR=$STACK/yarn/conf-client
ETL_YARN_RM_URL=http://127.0.0.1:$YARN_RM_WEB_PORT
EOF2
}
