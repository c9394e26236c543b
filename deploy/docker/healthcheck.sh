#!/bin/bash
# Container health check: GET /healthz on the bridge's status listener (http.listen) and
# succeed on a 200 answer. Uses bash's /dev/tcp, so the runtime image needs no HTTP client.
#
# The listener is the one the shipped configuration binds: APNS_BRIDGE_HTTP_LISTEN
# (host:port; a wildcard host is reached on loopback), else 127.0.0.1 and APNS_BRIDGE_HTTP_PORT
# (9464 when unset), for a configuration that sets http.listen itself.
set -euo pipefail

host=127.0.0.1
port="${APNS_BRIDGE_HTTP_PORT:-9464}"
if [[ -n "${APNS_BRIDGE_HTTP_LISTEN:-}" ]]; then
    port="${APNS_BRIDGE_HTTP_LISTEN##*:}"
    host="${APNS_BRIDGE_HTTP_LISTEN%:*}"
    host="${host#[}"
    host="${host%]}"
    case "$host" in
        "" | 0.0.0.0 | "*") host=127.0.0.1 ;;
        "::") host=::1 ;;
    esac
fi
exec 3<>"/dev/tcp/${host}/${port}"
printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
read -r -t 5 status_line <&3
[[ "$status_line" == "HTTP/1."[01]" 200"* ]]
