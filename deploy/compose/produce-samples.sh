#!/bin/bash
# The compose stack's sample producer: writes push requests (contract §2) to apns.requests with
# kafka-console-producer.sh, SAMPLE_RATE per second (default 20), SAMPLE_COUNT in all
# (default 0: until stopped). Most requests are delivered; the mix also shows fan-out with a
# duplicate token, an unregistered token (410, published on apns.invalid-tokens), a malformed
# token (outcome invalid) and broken JSON (apns.dead-letters).
set -euo pipefail

bootstrap="${KAFKA_BOOTSTRAP:-kafka:9092}"
topic="${SAMPLE_TOPIC:-apns.requests}"
rate="${SAMPLE_RATE:-20}"
count="${SAMPLE_COUNT:-0}"
app="${SAMPLE_APP:-demo}"
unregistered="${UNREGISTERED_TOKEN:-5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e5ca1ab1e}"
producer="${KAFKA_HOME:-/opt/kafka}/bin/kafka-console-producer.sh"

# One request per line, "key<TAB>value".
generate() {
    local index=0 id token payload
    while [ "$count" -eq 0 ] || [ "$index" -lt "$count" ]; do
        id="sample-$index"
        token="$(printf '%064x' "$index")"
        payload="{\"aps\":{\"alert\":{\"title\":\"Hello\",\"body\":\"sample $index\"}}}"
        if (( index % 100 == 99 )); then
            printf '%s\t{"id":"%s","tokens":[\n' "$id" "$id"
        elif (( index % 50 == 7 )); then
            printf '%s\t{"id":"%s","app":"%s","token":"%s","payload":%s}\n' "$id" "$id" "$app" "$unregistered" "$payload"
        elif (( index % 25 == 3 )); then
            printf '%s\t{"id":"%s","app":"%s","tokens":["%s","not-a-token"],"payload":%s}\n' "$id" "$id" "$app" "$token" "$payload"
        elif (( index % 10 == 1 )); then
            printf '%s\t{"id":"%s","app":"%s","tokens":["%s","%064x","%s"],"payload":%s}\n' \
                "$id" "$id" "$app" "$token" "$((index + 1000000000))" "$token" "$payload"
        else
            printf '%s\t{"id":"%s","app":"%s","token":"%s","payload":%s}\n' "$id" "$id" "$app" "$token" "$payload"
        fi
        index=$((index + 1))
        if (( index % rate == 0 )); then
            sleep 1
        fi
    done
}

echo "produce-samples: $rate requests/s to $topic on $bootstrap (count ${count}, 0 = until stopped)" >&2
generate | "$producer" --bootstrap-server "$bootstrap" --topic "$topic" \
    --property parse.key=true --property "key.separator=$(printf '\t')" \
    --producer-property acks=all --producer-property linger.ms=50
