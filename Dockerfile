# apns-bridge image: `docker build -t apns-bridge .` (docker-compose.yml builds it too).

# Build stage: the Swift toolchain the project is developed with, on Debian 12, plus the -dev
# packages it links against.
FROM swift:6.3-bookworm AS build
WORKDIR /src
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        librdkafka-dev libnghttp2-dev libssl-dev libyaml-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
# Package.swift names the test targets too (Tests/TestSupport is a plain target), so both trees go in.
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product apns-bridge --static-swift-stdlib \
    && install -m 0755 .build/release/apns-bridge /usr/local/bin/apns-bridge

# Runtime stage: Debian 12 slim with only the shared libraries the binary links (ldd of the
# release binary: libssl3, libnghttp2-14, librdkafka1 (with lz4, zstd, sasl2, zlib), libyaml,
# libstdc++6; the Swift runtime and Foundation are linked in statically), and jemalloc.
FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        librdkafka1 libnghttp2-14 libssl3 libyaml-0-2 libstdc++6 libjemalloc2 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/apns-bridge apns-bridge \
    && install -d -o apns-bridge -g apns-bridge -m 0750 /var/lib/apns-bridge /var/lib/apns-bridge/credentials
COPY --from=build /usr/local/bin/apns-bridge /usr/local/bin/apns-bridge
COPY deploy/docker/entrypoint.sh /usr/local/bin/apns-bridge-entrypoint
COPY deploy/docker/healthcheck.sh /usr/local/bin/apns-bridge-healthcheck
COPY config/ /etc/apns-bridge/
USER apns-bridge
WORKDIR /var/lib/apns-bridge
ENV APNS_BRIDGE_CONFIG=/etc/apns-bridge/bridge.yaml
# jemalloc instead of glibc's allocator: records are allocated on one thread and freed on another
# (librdkafka's, the consumer's, the event loops'), which glibc's per-thread caches do not serve;
# 11–15 % less CPU per notification (docs/BENCHMARKS.md, "The allocator"). `-e LD_PRELOAD=` turns it off.
ENV LD_PRELOAD=libjemalloc.so.2
# http.listen (/metrics, /healthz, /readyz): config/bridge.yaml listens on
# ${APNS_BRIDGE_HTTP_LISTEN:-127.0.0.1:9464}; in the container on every interface, or the exposed
# port could not be scraped. A configuration of one's own decides its address itself; the health
# check asks the address this variable names, so set it to that address too (docs/OPERATIONS.md).
ENV APNS_BRIDGE_HTTP_LISTEN=0.0.0.0:9464
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/apns-bridge-entrypoint"]
CMD ["run"]
