# apns-bridge: every target installs the Debian packages it needs first (scripts/setup).
SWIFT ?= swift
BIN_DEBUG = .build/debug/apns-bridge
BIN_RELEASE = .build/release/apns-bridge

# Sanitizer builds live in their own build directories so they never disturb the normal build.
# (`swift build --sanitize address` compiles with swiftc -sanitize=address; likewise thread.)
ASAN_BUILD = .build-asan
TSAN_BUILD = .build-tsan
# LeakSanitizer runs with the AddressSanitizer pass; library-internal leaks are suppressed in
# scripts/sanitizers/lsan.supp (documented there), everything else fails the run.
SANITIZER_ENV = LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/sanitizers/lsan.supp:print_suppressions=0 \
	TSAN_OPTIONS=suppressions=$(CURDIR)/scripts/sanitizers/tsan.supp:halt_on_error=0

.PHONY: setup build release test asan tsan lint run bench bench-targets bench-scale bench-memory fuzz fuzz-build fuzz-ci soak soak-ci clean

setup:
	@scripts/setup

build: setup
	$(SWIFT) build

release: setup
	$(SWIFT) build -c release

## Runs the whole test suite (unit and end-to-end) against the real libraries on loopback, then
## the same suite again built with AddressSanitizer (+ LeakSanitizer): memory safety is a standing
## check. scripts/test-suites runs TEST_JOBS test processes at a time, each one suite or a group
## of small suites with its tests one after the other: the suites spend most of their time
## waiting on Kafka's group and session timers, expirations and stop deadlines (one process at a
## time kept the 2-core machine about 7 % busy: 146 s of CPU in 1,113 s), and a process of their
## own keeps what a test measures of its process its own. TEST_FIRST names the longest suites,
## started first and alone so that none starts last. `make test TEST_JOBS=1` runs one at a time.
## Measured on the 2-core development machine from fresh clones (`bash .ci/run`): one process at
## a time, 26 minutes on 2026-11-30 (360 tests) growing to 34-37 on 2026-12-07 (628 tests: the
## suite 17.8 min, the sanitizer pass 6.4); three at a time, 21.5 minutes on 2026-12-07 (the
## suite 5.9 min, the sanitizer pass 2.6, the two builds 8). fuzz-ci runs 15 s per target.
TEST_JOBS ?= 3
TEST_FIRST = KafkaFaultTests|UncommittedSpanTests|ExactlyOnceProcessTests|StatusEndpointTests|DeliveryGuaranteeTests|PipelineEndToEndTests|RebalanceWhilePausedTests|BenchCommandTests|TransactionCommitterTests|BenchTargetsCommandTests|KafkaConsumerTests|ShutdownTests|CrashRecoveryTests|KafkaRebalanceTests|APNsRetryEndToEndTests|APNsSimulatorFaultTests|APNsClientFaultTests|CommandLineTests|LogSecrecyTests|KafkaProducerTests|ExactlyOnceStartTests|DemoCommandTests|UnreachableAPNsTests|APNsClientHostilePeerTests|HostResolverTests
test: setup lint
	$(SWIFT) build --build-tests
	scripts/test-suites $(TEST_JOBS) "$(TEST_FIRST)" ""
	$(MAKE) asan ASAN_SKIP="$(ASAN_CI_SKIP)"
	$(MAKE) fuzz-ci
	$(MAKE) soak-ci

## The suites `make test` leaves out of its AddressSanitizer pass: Kafka-protocol scenarios
## (broker faults, rebalances, kill and restart, exactly-once processes, the delivery guarantees'
## restarts, revocations and stop signals) that spend their minutes waiting on group and session
## timers, the stop scenarios (they wait out shutdown timeouts; the consumer's close, in time and
## out of it, runs under the sanitizer in KafkaConsumerTests), the uncommitted-span scenarios
## (they wait out a held notification's expiration), the bench command's runs (its report and options; the bridge
## processes it starts take the paths the command-line suites already run), the status
## endpoints (their server runs under the sanitizer in HTTP1ServerTests, the pipeline behind
## them in PipelineEndToEndTests), the log-secrecy runs (the command-line suites' paths with
## every log level), the demo command, and the retry scenarios through the pipeline (the
## pool's retries run under it in APNsClientFaultTests): none reaches memory through C
## (sockets, TLS, librdkafka, nghttp2) in a way the other suites do not already run under the
## sanitizer. Also the exactly-once committer's and start's scenarios (they wait out transaction
## backoffs and an unreachable coordinator; transactions run under the sanitizer in
## KafkaTransactionTests and PipelineEndToEndTests). `make asan` alone runs everything.
ASAN_CI_SKIP = KafkaFaultTests|ExactlyOnceProcessTests|DeliveryGuaranteeTests|CrashRecoveryTests|RebalanceWhilePausedTests|KafkaRebalanceTests|ShutdownTests|BenchCommandTests|BenchTargetsCommandTests|UncommittedSpanTests|StatusEndpointTests|LogSecrecyTests|DemoCommandTests|APNsRetryEndToEndTests|TransactionCommitterTests|ExactlyOnceStartTests
ASAN_SKIP ?=

## The suite under AddressSanitizer and LeakSanitizer (its own build directory).
asan: setup
	$(SWIFT) build --build-tests --sanitize address --build-path $(ASAN_BUILD)
	$(SANITIZER_ENV) scripts/test-suites $(TEST_JOBS) "$(TEST_FIRST)" "$(ASAN_SKIP)" \
		--sanitize address --build-path $(ASAN_BUILD)

## The suite under ThreadSanitizer (its own build directory). Not part of `make test`: see the
## figures above; run it after touching threads, locks or event loops. Every suite, TSAN_JOBS
## processes at a time (scripts/test-suites; the sanitizer slows the tests, so fewer than
## `make test`): 630 tests in 12 minutes on the 2-core machine on 2026-12-07, no report.
## librdkafka's C11 threads and locks go through pthread for the sanitizer to see them (see
## scripts/sanitizers/c11threads-for-tsan.c).
TSAN_JOBS ?= 2
tsan: setup
	$(SWIFT) build --build-tests --sanitize thread --build-path $(TSAN_BUILD)
	clang -shared -fPIC -O1 -o $(TSAN_BUILD)/libc11threads-for-tsan.so scripts/sanitizers/c11threads-for-tsan.c
	LD_PRELOAD=$(CURDIR)/$(TSAN_BUILD)/libc11threads-for-tsan.so $(SANITIZER_ENV) UNIT_TIMEOUT=2400 \
		scripts/test-suites $(TSAN_JOBS) "$(TEST_FIRST)" "" --sanitize thread --build-path $(TSAN_BUILD)

## Static checks of the compose stack, every YAML file and every shell script (scripts/lint):
## docker-compose config -q (also with the production override), yamllint, shellcheck.
lint: setup
	@scripts/lint

## Runs the demo: mock Kafka cluster + APNs simulator + the pipeline, all on loopback.
run: setup
	$(SWIFT) build
	$(BIN_DEBUG) demo

## The allocator the Docker image preloads into the bridge (Debian package libjemalloc2): the
## benchmarks and the soak run the bridge with it too. `make bench PRELOAD=` for glibc's.
PRELOAD ?= libjemalloc.so.2
PRELOAD_WRAPPER = $(if $(PRELOAD),--wrapper 'env LD_PRELOAD=$(PRELOAD)')

## Runs the benchmark (release build) against the simulator, with h2load as the reference ceiling.
bench: release
	$(BIN_RELEASE) bench $(PRELOAD_WRAPPER)

## The performance targets of docs/BENCHMARKS.md in one go: the seven runs that measure them,
## one after the other, then each target met, NOT MET or not measured with its figure. (About
## 1.5 min on the 2-core machines of docs/BENCHMARKS.md.)
bench-targets: release
	$(BIN_RELEASE) bench --targets $(PRELOAD_WRAPPER)

## Scaling out in a run: one, two and three `apns-bridge run` instances in one group against the
## same simulator and mock cluster (rate per instance and in total; docs/BENCHMARKS.md).
bench-scale: release
	@for instances in 1 2 3; do $(BIN_RELEASE) bench --instances $$instances --skip-paced $(PRELOAD_WRAPPER) || exit 1; done

## Resident memory of a real `apns-bridge run` process (docs/BENCHMARKS.md): 1,000,000
## notifications in requests of 5,000 tokens plus 50,000 single-token requests wait while APNs
## is unreachable, then the bridge catches up; exit 1 if its peak RSS passes 256 MB. (~1.5 min)
## (The whole benchmark process inherits the preload here, not only the bridge it starts; the
## figures are the bridge's.)
bench-memory: release
	LD_PRELOAD=$(PRELOAD) $(BIN_RELEASE) bench --memory

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

## The short pass CI runs as part of `make test`: 15 s per target after a build of about a minute
## from scratch (about 2.5 minutes in all on the 2-core development machine).
fuzz-ci:
	$(MAKE) fuzz FUZZ_SECONDS=15

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
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_SAMPLE_SECONDS=$(SOAK_SAMPLE_SECONDS) SOAK_RATE=$(SOAK_RATE) SOAK_PRELOAD=$(PRELOAD) \
		$$($(SWIFT) build --show-bin-path)/apns-bridgePackageTests.xctest --testing-library swift-testing --filter SoakTests

## The 150-second soak CI runs (part of `make test`).
soak-ci:
	$(MAKE) soak SOAK_SECONDS=150

clean:
	rm -rf .build .build-fuzz $(ASAN_BUILD) $(TSAN_BUILD)
