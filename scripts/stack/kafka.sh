# Sourced by scripts/local-stack: Apache Kafka's own broker, one KRaft node (broker and
# controller) on loopback, run by scripts/stack/kafka-node (its settings are there). Its log
# lives in .stack/kafka/data and survives restarts.

start_kafka() {
  launch kafka "$ROOT/scripts/stack/kafka-node" "$STACK/kafka" "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"
}
