# Build stage: the Swift toolchain plus the Debian -dev packages the project links against.
FROM swift:6.3-bookworm AS build
WORKDIR /src
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        librdkafka-dev libnghttp2-dev libssl-dev libyaml-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
COPY Package.swift ./
COPY Sources ./Sources
RUN swift build -c release --static-swift-stdlib && cp .build/release/apns-bridge /usr/local/bin/

# Runtime stage: only the shared libraries.
FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        librdkafka1 libnghttp2-14 libssl3 libyaml-0-2 ca-certificates \
    && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 apns-bridge
COPY --from=build /usr/local/bin/apns-bridge /usr/local/bin/apns-bridge
COPY config/bridge.yaml /etc/apns-bridge/bridge.yaml
USER apns-bridge
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/apns-bridge"]
CMD ["run", "--config", "/etc/apns-bridge/bridge.yaml"]
