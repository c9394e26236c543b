# apns-bridge: every target installs the Debian packages it needs first (scripts/setup).
SWIFT ?= swift
BIN_DEBUG = .build/debug/apns-bridge
BIN_RELEASE = .build/release/apns-bridge

.PHONY: setup build release test lint run bench fuzz fuzz-build fuzz-ci soak soak-ci clean

setup:
	@scripts/setup

build: setup
	$(SWIFT) build

release: setup
	$(SWIFT) build -c release

## Runs the whole test suite (unit and end-to-end) against the real libraries on loopback.
## One test at a time: many tests run servers, event loops and Kafka clients of their own, and on
## a 2-core machine parallel tests starve each other's threads (about a minute either way).
test: setup lint
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --no-parallel
	$(MAKE) soak-ci

## Static checks of the compose stack, every YAML file and every shell script (scripts/lint):
## docker-compose config -q (also with the production override), yamllint, shellcheck.
lint: setup
	@scripts/lint

## Runs the demo: mock Kafka cluster + APNs simulator + the pipeline, all on loopback.
run: setup
	$(SWIFT) build
	$(BIN_DEBUG) demo

## Runs the benchmark (release build) against the simulator, with h2load as the reference ceiling.
bench: release
	$(BIN_RELEASE) bench

## Fuzzing (docs/FUZZING.md): libFuzzer targets built with -sanitize=fuzzer,address in their own
## build directory (the manifest declares them only when APNS_BRIDGE_FUZZ is set). Each runs
## FUZZ_SECONDS from its seed corpus in fuzz/corpus/<name>; what it learns goes to
## .build-fuzz/corpus/<name>, crashes to .build-fuzz/crashes/<name>.
FUZZ_TARGETS = json push-request configuration http2-response
FUZZ_SECONDS ?= 60
FUZZ_BUILD = APNS_BRIDGE_FUZZ=1 $(SWIFT) build --build-path .build-fuzz \
	-Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld

fuzz-build: setup
	@for target in $(FUZZ_TARGETS); do $(FUZZ_BUILD) --product fuzz-$$target || exit 1; done

fuzz: fuzz-build
	@scripts/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

## The short pass CI runs (part of `make test`).
fuzz-ci:
	$(MAKE) fuzz FUZZ_SECONDS=20

## Soak (docs/RELIABILITY.md): the bridge binary for SOAK_SECONDS at SOAK_RATE notifications/s
## against the APNs simulator with faults on (GOAWAY, dropped connections, 503s, latency) and the
## mock Kafka cluster; prints the bridge's RSS, open descriptors, threads and throughput every
## SOAK_SAMPLE_SECONDS and fails unless they stay flat and every notification has one result.
SOAK_SECONDS ?= 600
SOAK_SAMPLE_SECONDS ?= 60
SOAK_RATE ?= 3000

## The test bundle runs directly (not through `swift test`, which holds its output back until
## the end) so that each sample line appears as it is taken.
soak: setup
	$(SWIFT) build --build-tests
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_SAMPLE_SECONDS=$(SOAK_SAMPLE_SECONDS) SOAK_RATE=$(SOAK_RATE) \
		$$($(SWIFT) build --show-bin-path)/apns-bridgePackageTests.xctest --testing-library swift-testing --filter SoakTests

## The 3-minute soak CI runs (part of `make test`).
soak-ci:
	$(MAKE) soak SOAK_SECONDS=180

clean:
	rm -rf .build .build-fuzz
