# dynrt — build, test and demo entry points. `make help` lists them.
SHELL := /bin/bash
GO ?= go
BIN := bin
PKGS := ./...
CMDS := dynrun dynpset dynrc dyntop
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X github.com/dynrt/dynrt/lib/buildinfo.version=$(VERSION)
FUZZTIME ?= 10s
TEST_TIMEOUT ?= 12m

.PHONY: help build install test bench fuzz verify demo clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

build: ## build the four binaries into bin/
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(CMDS))

install: ## install the binaries into $GOBIN (or $GOPATH/bin)
	$(GO) install -ldflags '$(LDFLAGS)' $(addprefix ./cmd/,$(CMDS))

test: ## run every test with the race detector
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

bench: ## run the Go benchmarks (figures go to docs/BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

fuzz: ## run every fuzz target for FUZZTIME (default 10s) each
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

verify: ## gofmt, go vet, staticcheck, go.mod tidiness, wire/ import rule
	@out=$$(gofmt -l $$(git ls-files '*.go') $$(git ls-files --others --exclude-standard '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	$(GO) mod tidy -diff
	@bad=$$($(GO) list -deps ./wire/... | grep '^github.com/dynrt/dynrt/lib' || true); \
	  if [ -n "$$bad" ]; then echo "wire/ must not import lib/: $$bad"; exit 1; fi
	@echo "verify: ok"

demo: build ## run the main job on a local virtual DVM
	@echo "dynrt demo (preview)"
	@echo
	@echo "Built: $$(ls $(BIN) | tr '\n' ' ')"
	@echo
	@echo "When the DVM and resource-change issues land, this target will:"
	@echo "  1. start a DVM of 4 virtual nodes x 8 slots on this host   (bin/dynrun dvm start --nodes 4 --slots 8)"
	@echo "  2. launch examples/synthetic with 8 processes               (bin/dynrun -n 8 ...)"
	@echo "  3. grow it 8 -> 32 and shrink it back to 8                  (bin/dynrc script)"
	@echo "  4. print the timing of every resource change and write a plot"
	@echo "  5. stop the DVM, leaving nothing running"
	@echo
	@echo "Today the binaries answer --help and --version:"
	@$(BIN)/dynrun --version

clean: ## remove build output
	rm -rf $(BIN)
