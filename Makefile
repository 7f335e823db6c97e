# kernstat: the two Quick start commands, and a few helpers.
#   make run    build (installing what is missing) and run `kernstat bar`
#   make test   install what the tests need, then format check, clippy, a check that
#               everything compiles for arm64 (aarch64-unknown-linux-gnu), and every test
#   make install / make uninstall   (PREFIX=/usr/local, DESTDIR= for staging)
#   make deb    a Debian package in target/debian/
.PHONY: run test build deps deps-test bench fuzz install uninstall deb soak

run: deps
	cargo build --release
	./target/release/kernstat bar

test: deps-test
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo check --workspace --target aarch64-unknown-linux-gnu
	cargo test --workspace --no-fail-fast

build: deps
	cargo build --release

deps:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

# The numbers in docs/measured.md.
bench: build
	scripts/bench.sh

# The soak (not in CI; `make test` runs a 2-minute version of the same): an hour of the
# daemon with a bar, 100 clients, ps/runqlat/writes beside it, under stress-ng; its
# memory, descriptors, map entries and CPU are plotted into docs/soak.svg.
SOAK_SECS ?= 3600
soak: deps-test
	KERNSTAT_SOAK_SECS=$(SOAK_SECS) KERNSTAT_SOAK_PLOT=$(CURDIR)/docs/soak.svg \
		cargo test --release -p kernstat --test soak -- --nocapture

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
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-daemon --lib shm::tests::props
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-daemon --lib git::files::props
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-daemon --test http_props
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-render --test props
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-daemon --test context_props -- --skip every_provider
	PROPTEST_CASES=$$(( $(FUZZ_CASES) / 10 )) cargo test --release -p kernstat-daemon --test context_props every_provider
	PROPTEST_CASES=$(FUZZ_CASES) cargo test --release -p kernstat-sources --test props
	PROPTEST_CASES=$$(( $(FUZZ_CASES) / 10 )) cargo test --release -p kernstat-sources --test fake_sysfs any_file

# Installation: the binary, the systemd units (system and user), the sysusers entry for
# the system daemon's user, shell completions and man pages generated from the binary's
# own flags. KERNSTAT_BIN installs another build (the package test uses the test build).
PREFIX ?= /usr/local
DESTDIR ?=
KERNSTAT_BIN ?= target/release/kernstat
# `kernstat` answers `get` itself and execs kernstat-full, from its own directory, for the rest.
KERNSTAT_FULL = $(dir $(KERNSTAT_BIN))kernstat-full
BINDIR = $(PREFIX)/bin
UNITDIR = $(PREFIX)/lib/systemd/system
USERUNITDIR = $(PREFIX)/lib/systemd/user
SYSUSERSDIR = $(PREFIX)/lib/sysusers.d
MANDIR = $(PREFIX)/share/man/man1
BASHDIR = $(PREFIX)/share/bash-completion/completions
ZSHDIR = $(PREFIX)/share/zsh/vendor-completions
FISHDIR = $(PREFIX)/share/fish/vendor_completions.d
GEN = target/generated

$(GEN): $(KERNSTAT_BIN)
	rm -rf $(GEN) && mkdir -p $(GEN)/man
	$(KERNSTAT_BIN) completions bash > $(GEN)/kernstat.bash
	$(KERNSTAT_BIN) completions zsh > $(GEN)/_kernstat
	$(KERNSTAT_BIN) completions fish > $(GEN)/kernstat.fish
	$(KERNSTAT_BIN) manpages $(GEN)/man
	gzip -9n $(GEN)/man/*.1

target/release/kernstat:
	@scripts/deps.sh build
	cargo build --release

install: $(GEN)
	install -Dm755 $(KERNSTAT_BIN) $(DESTDIR)$(BINDIR)/kernstat
	install -Dm755 $(KERNSTAT_FULL) $(DESTDIR)$(BINDIR)/kernstat-full
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(USERUNITDIR)
	sed 's|/usr/bin/kernstat|$(BINDIR)/kernstat|' dist/systemd/kernstat.service > $(DESTDIR)$(UNITDIR)/kernstat.service
	sed 's|/usr/bin/kernstat|$(BINDIR)/kernstat|' dist/systemd/user/kernstat.service > $(DESTDIR)$(USERUNITDIR)/kernstat.service
	chmod 644 $(DESTDIR)$(UNITDIR)/kernstat.service $(DESTDIR)$(USERUNITDIR)/kernstat.service
	install -Dm644 dist/sysusers.d/kernstat.conf $(DESTDIR)$(SYSUSERSDIR)/kernstat.conf
	install -Dm644 $(GEN)/kernstat.bash $(DESTDIR)$(BASHDIR)/kernstat
	install -Dm644 $(GEN)/_kernstat $(DESTDIR)$(ZSHDIR)/_kernstat
	install -Dm644 $(GEN)/kernstat.fish $(DESTDIR)$(FISHDIR)/kernstat.fish
	install -d $(DESTDIR)$(MANDIR)
	install -m644 $(GEN)/man/*.1.gz $(DESTDIR)$(MANDIR)/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/kernstat $(DESTDIR)$(BINDIR)/kernstat-full $(DESTDIR)$(UNITDIR)/kernstat.service \
		$(DESTDIR)$(USERUNITDIR)/kernstat.service $(DESTDIR)$(SYSUSERSDIR)/kernstat.conf \
		$(DESTDIR)$(BASHDIR)/kernstat $(DESTDIR)$(ZSHDIR)/_kernstat $(DESTDIR)$(FISHDIR)/kernstat.fish \
		$(DESTDIR)$(MANDIR)/kernstat.1.gz $(DESTDIR)$(MANDIR)/kernstat-*.1.gz

deb:
	scripts/deb.sh
