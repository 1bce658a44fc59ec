# Sourced by scripts/local-stack: its verbs, each over all SERVICES (up in their order, down
# in reverse), or over HDFS_SERVICES when given `hdfs` (down and status also take HDFS's when it
# runs). The services' own start_NAME functions are in scripts/stack/NAME.sh.

# The services a verb acts on: GROUP's (hdfs), else the stack's, and HDFS's if it runs and `all`.
services_of() {
  if [ "${1:-}" = hdfs ]; then echo "${HDFS_SERVICES[@]}"; return; fi
  if [ "${1:-}" = spark ]; then echo "${SPARK_SERVICES[@]}"; return; fi
  if [ "${1:-}" = postgres ]; then echo "${POSTGRES_SERVICES[@]}"; return; fi
  if [ "${1:-}" = yarn ]; then  # up starts HDFS first; down and status leave it alone
    [ "${2:-}" = all ] || echo "${HDFS_SERVICES[@]}"; echo "${YARN_SERVICES[@]}"; return
  fi
  echo "${SERVICES[@]}"
  if [ "${2:-}" = all ] && { hdfs_running || pid_of datanode >/dev/null; }; then echo "${HDFS_SERVICES[@]}"; fi
  if [ "${2:-}" = all ] && { yarn_running || pid_of nodemanager >/dev/null; }; then echo "${YARN_SERVICES[@]}"; fi
  if [ "${2:-}" = all ] && postgres_running; then echo "${POSTGRES_SERVICES[@]}"; fi
  if [ "${2:-}" = all ] && { spark_running || pid_of sparkworker1 >/dev/null || pid_of sparkworker2 >/dev/null; }; then
    echo "${SPARK_SERVICES[@]}"
  fi
}

# .stack/env: the endpoints for other scripts to source; HDFS's only while it runs.
write_env() {
  cat >"$STACK/env" <<EOF
ETL_ZK_HOSTS=127.0.0.1:$ZK_PORT
ETL_KAFKA_BOOTSTRAP=127.0.0.1:$KAFKA_PORT
ETL_METASTORE_URI=thrift://127.0.0.1:$METASTORE_PORT
ETL_THRIFT_URL=jdbc:hive2://127.0.0.1:$THRIFT_PORT/default
EOF
  if hdfs_running; then hdfs_env >>"$STACK/env"; fi
  if spark_running; then spark_env >>"$STACK/env"; fi
  if yarn_running; then yarn_env >>"$STACK/env"; fi
  if postgres_running; then postgres_env >>"$STACK/env"; fi
}

up() {
  local name port failed=0 t0 names
  read -ra names <<<"$(services_of "${1:-}" | tr '\n' ' ')"
  if [ ! -x "$PY" ] || ! command -v java >/dev/null; then
    echo "local-stack: no .venv or no java; run scripts/setup first" >&2; exit 1
  fi
  mkdir -p "$STACK"
  exec 9>"$STACK/.lock"
  flock 9  # concurrent `up`s (e.g. parallel test sessions) start each service once
  for name in "${names[@]}"; do
    port=$(port_of "$name")
    if pid_of "$name" >/dev/null; then
      if ready "$name"; then echo "$name: already running (pid $(pid_of "$name"), port $port)"; continue; fi
    elif port_open "$port"; then
      echo "$name: port $port is taken by a process not started by this script;" \
        "stop it or choose another port (ETL_*_PORT)" >&2
      failed=1; continue
    elif [ "$name" = thriftserver ] && ! ready metastore; then
      echo "thriftserver: not started: the metastore does not answer on port $METASTORE_PORT" >&2
      failed=1; continue
    elif [ "$name" = datanode ] && ! ready namenode; then
      echo "datanode: not started: the NameNode does not answer on port $HDFS_PORT" >&2
      failed=1; continue
    else
      "start_$name"
    fi
    t0=$(now_ms)
    if wait_ready "$name"; then
      t0=$(($(now_ms) - t0))
      echo "$name: up in $((t0 / 1000)).$((t0 % 1000 / 100))s (pid $(pid_of "$name"), port $port)"
    else
      echo "---- tail of $STACK/$name.log ----" >&2
      tail -n 40 "$STACK/$name.log" | cut -c1-300 >&2 || true
      failed=1
    fi
  done
  write_env
  return "$failed"
}

down() {
  local name pid port i failed=0 n names
  read -ra names <<<"$(services_of "${1:-}" all | tr '\n' ' ')"
  for ((n = ${#names[@]} - 1; n >= 0; n--)); do
    name=${names[n]}
    port=$(port_of "$name")
    if pid=$(pid_of "$name"); then
      kill -TERM "$pid" 2>/dev/null || true
      kill -CONT "$pid" 2>/dev/null || true  # a test may have left it SIGSTOPped
      for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "$name: still alive after TERM; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
      fi
      echo "$name: stopped (pid $pid)"
    else
      echo "$name: not running"
    fi
    rm -f "$STACK/$name.pid"
    for ((i = 0; i < 50; i++)); do port_open "$port" || break; sleep 0.2; done
    if port_open "$port"; then echo "$name: port $port still answers (another process?)" >&2; failed=1; fi
  done
  [ ! -f "$STACK/env" ] || write_env
  return "$failed"
}

status() {
  local name pid all=0 names
  read -ra names <<<"$(services_of "${1:-}" all | tr '\n' ' ')"
  for name in "${names[@]}"; do
    if pid=$(pid_of "$name") && ready "$name"; then
      printf '%-12s running  pid %-8s port %s\n' "$name" "$pid" "$(port_of "$name")"
    elif [ -n "${pid:-}" ]; then
      printf '%-12s starting pid %-8s port %s (not answering yet)\n' "$name" "$pid" "$(port_of "$name")"; all=3
    else
      printf '%-12s stopped  pid -        port %s\n' "$name" "$(port_of "$name")"; all=3
    fi
  done
  return "$all"
}
