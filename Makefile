# kernstat: the two Quick start commands, and a few helpers.
#   make run    build (installing what is missing) and run `kernstat bar`
#   make test   install what the tests need, then format check, clippy and every test
.PHONY: run test build deps deps-test bench fuzz

run: deps
	cargo build --release
	./target/release/kernstat bar

test: deps-test
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo test --workspace

build: deps
	cargo build --release

deps:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

# The numbers in the README (see "Measured").
bench: build
	scripts/bench.sh

# Every parser of untrusted input, property-tested for as long as one wants (`make test`
# runs the same properties with 256 cases each): make fuzz FUZZ_CASES=1000000
# Release speed with overflow checks and debug assertions on (overflows on absurd input
# are what these properties found; a plain release build would wrap silently).
FUZZ_CASES ?= 20000
fuzz: export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS = true
fuzz: export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS = true
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-bpf --lib ps::tests
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-daemon --test server props
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-render --test props
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-sources --test props
	PROPTEST_CASES=$$(( $(FUZZ_CASES) / 10 )) cargo test --release -p kernstat-sources --test fake_sysfs any_file
