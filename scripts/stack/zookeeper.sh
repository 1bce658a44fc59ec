# Sourced by scripts/local-stack: ZooKeeper (Debian's package), data kept in .stack/zookeeper.

# Healthy when it answers its four-letter word `ruok` with `imok` (an open port is not enough).
zk_ruok() {
  [ "$(timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$ZK_PORT && printf ruok >&3 && cat <&3" 2>/dev/null)" = imok ]
}

start_zookeeper() {
  mkdir -p "$STACK/zookeeper"
  # Sessions expire on the tick after their timeout: a 500 ms tick frees a killed run's lock within
  # 0.5 s of its timeout (2 s with ZooKeeper's default tick). The bounds stay what the default tick
  # gave (4 s to 60 s), so a job asking for less than 4 s still gets 4.
  cat >"$STACK/zookeeper/zoo.cfg" <<EOF
tickTime=500
minSessionTimeout=4000
maxSessionTimeout=60000
dataDir=$STACK/zookeeper
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=*
EOF
  # /usr/share/java holds several SLF4J bindings; put slf4j-simple first so the log has content.
  launch zookeeper java -Xmx256m -Dzookeeper.jmx.log4j.disable=true \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -cp '/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-simple.jar:/usr/share/java/*' \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$STACK/zookeeper/zoo.cfg"
}
