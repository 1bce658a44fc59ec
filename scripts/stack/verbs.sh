# Sourced by scripts/local-stack: its verbs, each over all SERVICES (up in their order, down
# in reverse). The services' own start_NAME functions are in scripts/stack/NAME.sh.

up() {
  local name port failed=0 t0
  if [ ! -x "$PY" ] || ! command -v java >/dev/null; then
    echo "local-stack: no .venv or no java; run scripts/setup first" >&2; exit 1
  fi
  mkdir -p "$STACK"
  exec 9>"$STACK/.lock"
  flock 9  # concurrent `up`s (e.g. parallel test sessions) start each service once
  for name in "${SERVICES[@]}"; do
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
  cat >"$STACK/env" <<EOF
ETL_ZK_HOSTS=127.0.0.1:$ZK_PORT
ETL_KAFKA_BOOTSTRAP=127.0.0.1:$KAFKA_PORT
ETL_METASTORE_URI=thrift://127.0.0.1:$METASTORE_PORT
ETL_THRIFT_URL=jdbc:hive2://127.0.0.1:$THRIFT_PORT/default
EOF
  return "$failed"
}

down() {
  local name pid port i failed=0 n
  for ((n = ${#SERVICES[@]} - 1; n >= 0; n--)); do
    name=${SERVICES[n]}
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
  return "$failed"
}

status() {
  local name pid all=0
  for name in "${SERVICES[@]}"; do
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
