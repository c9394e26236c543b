#!/bin/sh
# Entry point of the apns-bridge image.
#
# APNS_BRIDGE_WAIT_FOR may name files (separated by spaces) that must exist before the bridge
# starts, e.g. the credentials the APNs simulator of the compose stack generates into a shared
# volume. It waits up to APNS_BRIDGE_WAIT_SECONDS (default 60) for them, then runs
# `apns-bridge` (APNS_BRIDGE_BINARY, default /usr/local/bin/apns-bridge) with the container's
# arguments (default: `run`).
set -eu

wait_seconds="${APNS_BRIDGE_WAIT_SECONDS:-60}"
for file in ${APNS_BRIDGE_WAIT_FOR:-}; do
    waited=0
    while [ ! -s "$file" ]; do
        if [ "$waited" -ge "$wait_seconds" ]; then
            echo "entrypoint: $file did not appear within ${wait_seconds}s" >&2
            exit 1
        fi
        if [ "$waited" -eq 0 ]; then
            echo "entrypoint: waiting for $file" >&2
        fi
        sleep 1
        waited=$((waited + 1))
    done
done

exec "${APNS_BRIDGE_BINARY:-/usr/local/bin/apns-bridge}" "$@"
