# kernstat: the two Quick start commands, and a few helpers.
#   make run    build (installing what is missing) and run `kernstat bar`
#   make test   install what the tests need, then format check, clippy and every test
.PHONY: run test build deps deps-test bench

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
