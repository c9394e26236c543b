# apns-bridge: every target installs the Debian packages it needs first (scripts/setup).
SWIFT ?= swift
BIN_DEBUG = .build/debug/apns-bridge
BIN_RELEASE = .build/release/apns-bridge

# Sanitizer builds live in their own build directories so they never disturb the normal build.
ASAN_BUILD = .build-asan
TSAN_BUILD = .build-tsan
# LeakSanitizer runs with the AddressSanitizer pass; library-internal leaks are suppressed in
# scripts/sanitizers/lsan.supp (documented there), everything else fails the run.
SANITIZER_ENV = LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/sanitizers/lsan.supp:print_suppressions=0 \
	TSAN_OPTIONS=suppressions=$(CURDIR)/scripts/sanitizers/tsan.supp:halt_on_error=0

.PHONY: setup build release test asan tsan lint run bench bench-scale fuzz fuzz-build fuzz-ci clean

setup:
	@scripts/setup

build: setup
	$(SWIFT) build

release: setup
	$(SWIFT) build -c release

## Runs the whole test suite (unit and end-to-end) against the real libraries on loopback, then
## the same suite again built with AddressSanitizer (+ LeakSanitizer): memory safety is a standing
## check. One test at a time: many tests run servers, event loops and Kafka clients of their own,
## and on a 2-core machine parallel tests starve each other's threads.
## Measured on the 2-core development machine, from a clean checkout: TEST_DURATION_PLACEHOLDER
test: setup lint
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --no-parallel
	$(MAKE) asan
	$(MAKE) fuzz-ci

## The suite under AddressSanitizer and LeakSanitizer (its own build directory).
asan: setup
	$(SWIFT) build --build-tests --sanitize address --build-path $(ASAN_BUILD)
	$(SANITIZER_ENV) $(SWIFT) test --skip-build --sanitize address --build-path $(ASAN_BUILD) --no-parallel

## The suite under ThreadSanitizer (its own build directory). Not part of `make test`: see the
## figures above; run it after touching threads, locks or event loops.
tsan: setup
	$(SWIFT) build --build-tests --sanitize thread --build-path $(TSAN_BUILD)
	$(SANITIZER_ENV) $(SWIFT) test --skip-build --sanitize thread --build-path $(TSAN_BUILD) --no-parallel

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

## Scaling out in a run: one, two and three `apns-bridge run` instances in one group against the
## same simulator and mock cluster (rate per instance and in total; docs/BENCHMARKS.md).
bench-scale: release
	@for instances in 1 2 3; do $(BIN_RELEASE) bench --instances $$instances --skip-paced || exit 1; done

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

## The short pass CI runs as part of `make test`: 20 s per target after a build of about a minute
## from scratch (about 3 minutes in all on the 2-core development machine).
fuzz-ci:
	$(MAKE) fuzz FUZZ_SECONDS=20

clean:
	rm -rf .build .build-fuzz $(ASAN_BUILD) $(TSAN_BUILD)
