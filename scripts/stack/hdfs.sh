# Sourced by scripts/local-stack: HDFS, an optional service (`scripts/local-stack up hdfs`): a
# NameNode and a DataNode, two processes of Hadoop's own jars run by scripts/stack/hdfs-node
# (their settings are there), on loopback, WebHDFS on. The namespace and the blocks live in
# .stack/hdfs and survive restarts. A bare `up` leaves HDFS alone: few tests need it.

HDFS_SERVICES=(namenode datanode)  # started in this order, stopped in reverse

hdfs_node() {
  launch "$1" "$ROOT/scripts/stack/hdfs-node" "$1" "$STACK/hdfs" "$HDFS_PORT" "$HDFS_HTTP_PORT" \
    "$HDFS_DATANODE_PORT" "$HDFS_DATANODE_HTTP_PORT" "$HDFS_DATANODE_IPC_PORT"
}
start_namenode() { hdfs_node namenode; }
start_datanode() { hdfs_node datanode; }

# The NameNode's JMX bean BEAN, or nothing if it does not answer.
namenode_jmx() {
  curl -sf --max-time 2 "http://127.0.0.1:$HDFS_HTTP_PORT/jmx?qry=Hadoop:service=NameNode,name=$1" 2>/dev/null
}

# HDFS serves writes: the NameNode has left safe mode and counts a live DataNode.
hdfs_serving() {
  namenode_jmx NameNodeInfo | grep -q '"Safemode" : ""' \
    && namenode_jmx FSNamesystemState | grep -Eq '"NumLiveDataNodes" : [1-9]'
}

hdfs_running() { pid_of namenode >/dev/null; }

hdfs_env() {
  cat <<EOF
ETL_WEBHDFS_URL=webhdfs://127.0.0.1:$HDFS_HTTP_PORT
ETL_HDFS_URI=hdfs://127.0.0.1:$HDFS_PORT
EOF
}
