# dynrt — build, test and demo entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
BIN := bin
PKGS := ./...
CMDS := dynrun dynpset dynrc dyntop
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X github.com/dynrt/dynrt/lib/buildinfo.version=$(VERSION)
# Start-up time matters (every `dynrun` launch pays it): netgo keeps the
# binaries static (no libc loading, no cgo runtime: about 1 ms less per start
# here; host names resolve with Go's resolver), urfave_cli_no_docs drops the
# CLI library's man/markdown generator. scripts/bench-launch.sh uses the same.
BUILDTAGS := urfave_cli_no_docs,netgo
# PMIx (Open MPI programs, docs/mpi.md "Open MPI (PMIx)"): lib/pmix's cgo
# server is built in with the tag pmix when libpmix-dev is installed
# (pkg-config knows pmix). Evaluated in the recipes' shell, not when make
# reads this file, so `make test` sees what deps-openmpi just installed.
# Without it the binaries stay static and pure Go, and --pmi pmix is refused.
PMIXTAG = $$(pkg-config --exists pmix 2>/dev/null && echo pmix)
GOTAGS = -tags "$(BUILDTAGS),$(PMIXTAG)"
FUZZTIME ?= 10s
# make test ends with every fuzz target for this many inputs (CI's short
# run; the targets are meant to pass `make fuzz FUZZTIME=10m`). A count,
# not a duration: a 5s run failed once with "context deadline exceeded"
# when its time ran out, with no failing input.
FUZZTIME_TEST ?= 200000x
# make chaos: steps, seed and fault kinds of the long chaos run.
STEPS ?= 2000
SEED ?= 1
FAULTS ?= all
TEST_TIMEOUT ?= 12m

# libdynrt (the C library, libdynrt/) and the C example are built with the
# system compiler into LIBDYNRT_BUILD; `make install PREFIX=...` installs the
# binaries and libdynrt, `make libdynrt-install PREFIX=...` only libdynrt
# (header, libdynrt.so, libdynrt.a, dynrt.pc).
CC ?= cc
PREFIX ?= /usr/local
LIBDYNRT_BUILD ?= build/libdynrt
DYNRT_VERSION := 1.0.0
DYNRT_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -fPIC -pthread -Ilibdynrt/include $(CFLAGS)
DYNRT_LIBS = $$(pkg-config --libs msgpack 2>/dev/null || echo -lmsgpackc) -pthread
LIBDYNRT_SRC := $(wildcard libdynrt/src/*.c)
LIBDYNRT_OBJ := $(patsubst libdynrt/src/%.c,$(LIBDYNRT_BUILD)/obj/%.o,$(LIBDYNRT_SRC))
LIBDYNRT_OUT := $(LIBDYNRT_BUILD)/libdynrt.a $(LIBDYNRT_BUILD)/libdynrt.so $(LIBDYNRT_BUILD)/dynrt-unit $(LIBDYNRT_BUILD)/dynrt-malleable $(LIBDYNRT_BUILD)/c-synthetic

.PHONY: help build install go-install test deps-tmux deps-msgpack deps-valgrind deps-pymsgpack libdynrt libdynrt-install deps-hosts deps-slurm deps-mpi deps-openmpi deps-mpich-src mpich-suite bench bench-failure bench-scale bench-hosts fuzz chaos verify demo demo-failure clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

build: ## build the four binaries into bin/ (with the PMIx server when libpmix-dev is installed)
	@mkdir -p $(BIN)
	$(GO) build $(GOTAGS) -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))

install: build libdynrt-install ## install the four binaries into PREFIX/bin and libdynrt (header, libraries, dynrt.pc) under PREFIX (/usr/local)
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(addprefix $(BIN)/,$(CMDS)) $(DESTDIR)$(PREFIX)/bin/

go-install: ## install the four binaries into $GOBIN (or $GOPATH/bin)
	$(GO) install $(GOTAGS) -ldflags '$(LDFLAGS)' $(addprefix ./cmd/,$(CMDS))

test: deps-tmux deps-hosts deps-slurm deps-mpi deps-openmpi deps-mpich-src deps-msgpack deps-valgrind deps-pymsgpack ## run every test with the race detector (-tags pmix when libpmix-dev is installed), then each fuzz target for FUZZTIME_TEST (200000 inputs)
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -tags "$(PMIXTAG)" $(PKGS)
	@# Built with PMIx, the tests above skip what a dynrun without it does
	@# (refuse Open MPI programs with the fix): run those on the default build.
	@if [ -n "$(PMIXTAG)" ]; then echo "$(GO) test -race -count=1 -run WithoutPMIx ./cmd/dynrun"; \
	  $(GO) test -race -count=1 -run WithoutPMIx ./cmd/dynrun; fi
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_TEST)

deps-tmux: ## install tmux (Debian) for dyntop's end-to-end test, if missing
	@command -v tmux >/dev/null 2>&1 || { \
	  echo "installing tmux for dyntop's end-to-end test"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq tmux >/dev/null; } \
	    || echo "warning: could not install tmux; dyntop's end-to-end test will be skipped"; }

# The package's maintainer scripts would start Debian's own sshd (port 22 of
# the machine): a policy-rc.d that answers 101 ("action forbidden") stops
# invoke-rc.d and deb-systemd-invoke from starting it. One already there
# (containers ship one) is kept; ours is removed after the install.
deps-msgpack: ## install Debian's libmsgpack-dev (msgpack-c, which libdynrt encodes the wire protocol with), if missing
	@{ [ -f /usr/include/msgpack.h ] || pkg-config --exists msgpack; } 2>/dev/null || { \
	  echo "installing libmsgpack-dev for libdynrt"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libmsgpack-dev pkg-config >/dev/null; } \
	    || echo "warning: could not install libmsgpack-dev; the libdynrt tests will be skipped"; }

deps-valgrind: ## install Debian's valgrind for the leak check of libdynrt, if missing
	@command -v valgrind >/dev/null 2>&1 || { \
	  echo "installing valgrind for the leak check of libdynrt"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq valgrind >/dev/null; } \
	    || echo "warning: could not install valgrind; the leak check of libdynrt will be skipped"; }

deps-pymsgpack: ## install Debian's python3-msgpack for the Python client example (examples/py-malleable), if missing
	@{ /usr/bin/python3 -c 'import msgpack' || python3 -c 'import msgpack'; } >/dev/null 2>&1 || { \
	  echo "installing python3-msgpack for examples/py-malleable"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3 python3-msgpack >/dev/null; } \
	    || echo "warning: could not install python3-msgpack; the Python client test will be skipped"; }

libdynrt: $(LIBDYNRT_OUT) ## build libdynrt (.a, .so), its test programs and examples/c-synthetic into LIBDYNRT_BUILD (build/libdynrt)

# The library's own helpers are hidden (-fvisibility=hidden; dynrt.h makes
# its declarations visible): the shared library exports the dynrt_* calls
# only, and the static one is a single object whose helpers are made local,
# so no name of the library can clash with a name of the program.
$(LIBDYNRT_BUILD)/obj/%.o: libdynrt/src/%.c libdynrt/src/internal.h libdynrt/include/dynrt.h | deps-msgpack
	@mkdir -p $(@D)
	$(CC) $(DYNRT_CFLAGS) -DDYNRT_BUILD -fvisibility=hidden -c $< -o $@

$(LIBDYNRT_BUILD)/libdynrt.a: $(LIBDYNRT_OBJ)
	$(LD) -r -o $(LIBDYNRT_BUILD)/obj/dynrt-all.o $^
	objcopy --localize-hidden $(LIBDYNRT_BUILD)/obj/dynrt-all.o
	rm -f $@ && ar rcs $@ $(LIBDYNRT_BUILD)/obj/dynrt-all.o

$(LIBDYNRT_BUILD)/libdynrt.so: $(LIBDYNRT_OBJ)
	$(CC) -shared -Wl,-soname,libdynrt.so.1 -o $@ $(LIBDYNRT_OBJ) $(DYNRT_LIBS)

$(LIBDYNRT_BUILD)/dynrt-%: libdynrt/test/%.c $(LIBDYNRT_BUILD)/libdynrt.a
	$(CC) $(DYNRT_CFLAGS) $< -o $@ $(LIBDYNRT_BUILD)/libdynrt.a $(DYNRT_LIBS)

# No fused multiply-add: the work's floating point must count exactly as
# the Go benchmark's (the tests compare the results).
$(LIBDYNRT_BUILD)/c-synthetic: examples/c-synthetic/src/synthetic.c $(LIBDYNRT_BUILD)/libdynrt.a
	$(CC) $(DYNRT_CFLAGS) -ffp-contract=off $< -o $@ $(LIBDYNRT_BUILD)/libdynrt.a $(DYNRT_LIBS) -lm

libdynrt-install: $(LIBDYNRT_BUILD)/libdynrt.a $(LIBDYNRT_BUILD)/libdynrt.so ## install libdynrt's header, libraries and dynrt.pc under PREFIX (/usr/local)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 libdynrt/include/dynrt.h libdynrt/include/dynrt_pmix.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(LIBDYNRT_BUILD)/libdynrt.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBDYNRT_BUILD)/libdynrt.so $(DESTDIR)$(PREFIX)/lib/libdynrt.so.$(DYNRT_VERSION)
	ln -sf libdynrt.so.$(DYNRT_VERSION) $(DESTDIR)$(PREFIX)/lib/libdynrt.so.1
	ln -sf libdynrt.so.1 $(DESTDIR)$(PREFIX)/lib/libdynrt.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(DYNRT_VERSION)|' libdynrt/dynrt.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/dynrt.pc

deps-hosts: ## install iproute2, util-linux and openssh-server (Debian) for the namespace-host tests, if missing, without starting Debian's sshd
	@{ command -v ip && command -v nsenter && command -v unshare && command -v ssh && [ -x /usr/sbin/sshd ]; } >/dev/null 2>&1 || { \
	  echo "installing iproute2, util-linux and openssh-server for the namespace-host tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  policy=/usr/sbin/policy-rc.d; ours=; \
	  if [ ! -e $$policy ]; then \
	    printf '#!/bin/sh\n# dynrt make deps-hosts: start no service while installing\nexit 101\n' | $$SUDO tee $$policy >/dev/null \
	      && $$SUDO chmod 755 $$policy && ours=1; \
	  fi; \
	  { $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq iproute2 util-linux openssh-server openssh-client >/dev/null; } \
	    || echo "warning: could not install them; the namespace-host tests will be skipped"; \
	  if [ -n "$$ours" ]; then $$SUDO rm -f $$policy; fi; }

deps-slurm: deps-hosts ## install Debian's Slurm (slurmctld, slurmd, slurm-client) and munge for the Slurm tests, if missing, without starting Debian's daemons
	@{ command -v slurmctld && command -v slurmd && command -v salloc && command -v munged; } >/dev/null 2>&1 || { \
	  echo "installing slurmctld, slurmd, slurm-client and munge for the Slurm tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  policy=/usr/sbin/policy-rc.d; ours=; \
	  if [ ! -e $$policy ]; then \
	    printf '#!/bin/sh\n# dynrt make deps-slurm: start no service while installing\nexit 101\n' | $$SUDO tee $$policy >/dev/null \
	      && $$SUDO chmod 755 $$policy && ours=1; \
	  fi; \
	  { $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null; } \
	    || echo "warning: could not install them; the Slurm tests will be skipped"; \
	  if [ -n "$$ours" ]; then $$SUDO rm -f $$policy; fi; }

deps-mpi: ## install Debian's MPICH (mpich, libmpich-dev) for the MPI tests, if missing
	@command -v mpicc.mpich >/dev/null 2>&1 || { \
	  echo "installing MPICH (mpich, libmpich-dev) for the MPI tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq mpich libmpich-dev >/dev/null; } \
	    || echo "warning: could not install MPICH; the MPI tests will be skipped"; }

# OpenPMIx 4.2 (libpmix-dev) is what the PMIx server of the daemons is built
# against (cgo, -tags pmix); Debian's Open MPI 4.1 links the same library.
deps-openmpi: ## install Debian's libpmix-dev, libopenmpi-dev and openmpi-bin for the PMIx server and the Open MPI tests, if missing
	@{ pkg-config --exists pmix && command -v mpicc.openmpi && command -v mpirun.openmpi; } >/dev/null 2>&1 || { \
	  echo "installing libpmix-dev, libopenmpi-dev and openmpi-bin for the PMIx server and the Open MPI tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libpmix-dev libopenmpi-dev openmpi-bin pkg-config >/dev/null; } \
	    || echo "warning: could not install them; dynrun is built without PMIx and the Open MPI tests will be skipped"; }

deps-mpich-src: ## fetch MPICH's sources with its test suite (apt-get source mpich) into the cache, if missing
	@scripts/mpich-suite.sh fetch \
	  || echo "warning: could not fetch MPICH's sources; the MPICH test-suite tests will be skipped"

mpich-suite: deps-mpi ## MPICH's test suite under Hydra and dynrun, all builds, building what is missing (BUILDS= DIRS= SUBSET= TESTS= RUNNERS= RECHECK= TIMEOUT=; docs/mpi.md)
	scripts/mpich-suite.sh

bench: ## run the Go benchmarks (figures go to docs/BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

bench-failure: ## recovery from a lost process, node or hung node under --on-failure shrink and replace (lib/session BenchmarkFailure)
	$(GO) test -run '^$$' -bench Failure -benchtime $${BENCHTIME:-10x} ./lib/session

bench-scale: ## cost against DVM size on a simulated DVM of 16 to 1,024 nodes x 64 slots: tables, growth exponents, log-log plot in bench-out/scale (NODES= SLOTS= K=; scripts/bench-scale.sh, docs/scale.md)
	scripts/bench-scale.sh

bench-hosts: deps-hosts deps-mpi ## as root: DVM start, warm launch and dvm grow on 3+1 namespace hosts against Hydra (ROUNDS= NS=; scripts/bench-hosts.sh)
	scripts/bench-hosts.sh

fuzz: ## run every fuzz target for FUZZTIME (default 10s; 10m for a long run) each
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

chaos: build ## long chaos run (STEPS=2000 SEED=1 FAULTS=all): faults and changes on a live DVM, invariants checked, summary
	$(GO) build -o $(BIN)/malleable ./internal/malleable
	$(GO) run ./scripts/chaos -seed $(SEED) -steps $(STEPS) -faults $(FAULTS) -dynrun $(BIN)/dynrun -malleable $(BIN)/malleable $(CHAOSFLAGS)

verify: ## gofmt, go vet and staticcheck (without and, with libpmix-dev, with -tags pmix), the pure-Go build, go.mod tidiness, wire/ import rule
	@out=$$(gofmt -l $$(git ls-files '*.go') $$(git ls-files --others --exclude-standard '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	@# The default build must need neither cgo nor libpmix-dev.
	CGO_ENABLED=0 $(GO) build $(PKGS)
	@if pkg-config --exists pmix 2>/dev/null; then \
	  echo "$(GO) vet -tags pmix $(PKGS)" && $(GO) vet -tags pmix $(PKGS) && \
	  echo "$(GO) run $(STATICCHECK) -tags pmix $(PKGS)" && $(GO) run $(STATICCHECK) -tags pmix $(PKGS); \
	else echo "verify: libpmix-dev is missing: -tags pmix not checked (make deps-openmpi)"; fi
	$(GO) mod tidy -diff
	@bad=$$($(GO) list -deps ./wire/... | grep '^github.com/dynrt/dynrt/lib' || true); \
	  if [ -n "$$bad" ]; then echo "wire/ must not import lib/: $$bad"; exit 1; fi
	@echo "verify: ok"

demo-failure: ## a node of a local virtual DVM killed under the synthetic benchmark (--on-failure shrink): the job carries on; plot in bench-out/demo-failure (scripts/demo-failure.sh)
	scripts/demo-failure.sh

demo: ## the main job: the synthetic benchmark grown 8 -> 32 -> 8 on a local virtual DVM, plot in bench-out/demo (scripts/demo.sh)
	scripts/demo.sh

clean: ## remove build output
	rm -rf $(BIN) build
