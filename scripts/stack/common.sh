# Sourced by scripts/local-stack: what every service shares. Each service's port, wait limit
# and command-line marker; whether it answers; its pid file; starting it detached; waiting
# for it. Uses STACK, the *_PORT and *TIMEOUT settings of scripts/local-stack.

port_of() {
  case $1 in
    zookeeper) echo "$ZK_PORT" ;; kafka) echo "$KAFKA_PORT" ;; metastore) echo "$METASTORE_PORT" ;;
    thriftserver) echo "$THRIFT_PORT" ;; namenode) echo "$HDFS_PORT" ;; datanode) echo "$HDFS_DATANODE_PORT" ;;
    sparkmaster) echo "$SPARK_MASTER_PORT" ;; sparkworker1) echo "$SPARK_WORKER1_UI_PORT" ;; sparkworker2) echo "$SPARK_WORKER2_UI_PORT" ;;
    resourcemanager) echo "$YARN_RM_PORT" ;; nodemanager) echo "$YARN_NM_PORT" ;; postgres) echo "$POSTGRES_PORT" ;;
  esac
}

timeout_of() { if [ "$1" = thriftserver ]; then echo "$THRIFT_TIMEOUT"; else echo "$TIMEOUT"; fi; }

# A word of the service's command line, so a stale pid file never matches a foreign process.
marker_of() {
  case $1 in
    zookeeper) echo QuorumPeerMain ;; kafka) echo kafka.Kafka ;; metastore) echo LoopbackMetastore ;;
    thriftserver) echo HiveThriftServer2 ;;
    namenode) echo server.namenode.NameNode ;; datanode) echo server.datanode.DataNode ;;
    sparkmaster) echo deploy.master.Master ;; sparkworker*) echo deploy.worker.Worker ;;
    resourcemanager) echo resourcemanager.ResourceManager ;; nodemanager) echo nodemanager.NodeManager ;;
    postgres) echo bin/postgres ;;
  esac
}

now_ms() { local us=${EPOCHREALTIME//[.,]/}; echo $((us / 1000)); }

port_open() { (: </dev/tcp/127.0.0.1/"$1") 2>/dev/null; }

# Whether the service answers: ZooKeeper's own health word (zookeeper.sh); the DataNode once
# HDFS serves writes (hdfs.sh); else an open port.
ready() {
  case $1 in
    zookeeper) zk_ruok ;;
    namenode) port_open "$HDFS_PORT" && port_open "$HDFS_HTTP_PORT" ;;
    datanode) port_open "$HDFS_DATANODE_HTTP_PORT" && hdfs_serving ;;
    sparkmaster) port_open "$SPARK_MASTER_PORT" && port_open "$SPARK_MASTER_UI_PORT" ;;
    sparkworker*) spark_worker_alive "$(port_of "$1")" ;;
    resourcemanager) port_open "$YARN_RM_PORT" && port_open "$YARN_RM_WEB_PORT" ;;
    nodemanager) port_open "$YARN_NM_PORT" && yarn_node_running ;;
    *) port_open "$(port_of "$1")" ;;
  esac
}

# Print the pid of the service if it is alive, else fail.
pid_of() {
  local pidfile=$STACK/$1.pid pid cmdline
  [ -s "$pidfile" ] || return 1
  pid=$(<"$pidfile")
  cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
  [[ $cmdline == *"$(marker_of "$1")"* ]] || return 1
  echo "$pid"
}

# launch NAME CMD...: run CMD in its own session with a pid file, its output in the log, and
# none of our file descriptors (a caller's pipe held open would make CI wait for the daemons).
launch() {
  local name=$1; shift
  rm -f "$STACK/$name.pid"
  [ ! -f "$STACK/$name.log" ] || mv -f "$STACK/$name.log" "$STACK/$name.log.1"
  (cd "$STACK" && exec setsid nohup bash -c '
    echo $$ >"$0"
    for fd in /proc/$$/fd/*; do fd=${fd##*/}; ((fd > 2)) && eval "exec $fd>&-"; done
    exec "$@"' "$STACK/$name.pid" "$@") >"$STACK/$name.log" 2>&1 </dev/null &
}

# wait_ready NAME: until the service answers; fail early if its process died.
wait_ready() {
  local name=$1 start=$SECONDS limit
  limit=$(timeout_of "$1")
  until ready "$name"; do
    # Whether the process is alive, not pid_of: until the launcher's exec, its command line
    # does not show the service's marker yet.
    if [ -s "$STACK/$name.pid" ] && ! kill -0 "$(<"$STACK/$name.pid")" 2>/dev/null; then
      echo "$name: process exited" >&2; return 1
    fi
    if ((SECONDS - start >= limit)); then
      echo "$name: no answer on port $(port_of "$name") after ${limit}s" >&2; return 1
    fi
    sleep 0.2
  done
}
