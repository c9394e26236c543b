#!/bin/bash
# Container health check: GET /healthz on the bridge's status listener (http.listen) and
# succeed on a 200 answer. Uses bash's /dev/tcp, so the runtime image needs no HTTP client.
set -euo pipefail

port="${APNS_BRIDGE_HTTP_PORT:-9464}"
exec 3<>"/dev/tcp/127.0.0.1/${port}"
printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
read -r -t 5 status_line <&3
[[ "$status_line" == "HTTP/1."[01]" 200"* ]]
