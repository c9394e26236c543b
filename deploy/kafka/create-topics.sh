#!/bin/bash
# Creates the bridge's topics (contract §1) with kafka-topics.sh; safe to run again.
#
#   KAFKA_BOOTSTRAP           broker to talk to (default kafka:9092)
#   REQUEST_PARTITIONS        apns.requests: the most instances that can share the work (default 12)
#   RESULT_PARTITIONS         apns.results (default 12)
#   INVALID_TOKEN_PARTITIONS  apns.invalid-tokens, log-compacted: key = device token (default 6)
#   DEAD_LETTER_PARTITIONS    apns.dead-letters (default 3)
#   REPLICATION_FACTOR        1 for the single-broker stack; 3 on a production cluster
set -euo pipefail

bootstrap="${KAFKA_BOOTSTRAP:-kafka:9092}"
replication="${REPLICATION_FACTOR:-1}"
topics_tool="${KAFKA_HOME:-/opt/kafka}/bin/kafka-topics.sh"

create() {
    local topic="$1" partitions="$2"
    shift 2
    echo "create-topics: $topic ($partitions partitions) $*"
    "$topics_tool" --bootstrap-server "$bootstrap" --create --if-not-exists \
        --topic "$topic" --partitions "$partitions" --replication-factor "$replication" "$@"
}

create apns.requests "${REQUEST_PARTITIONS:-12}"
create apns.results "${RESULT_PARTITIONS:-12}"
create apns.invalid-tokens "${INVALID_TOKEN_PARTITIONS:-6}" --config cleanup.policy=compact
create apns.dead-letters "${DEAD_LETTER_PARTITIONS:-3}"
# One summary line per topic (partition count, configuration), without the per-partition lines.
"$topics_tool" --bootstrap-server "$bootstrap" --describe --topic 'apns\..*' | grep -v 'Partition:' || true
