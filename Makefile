# torchmem — post-mortem of PyTorch GPU memory.
GO      ?= go
BIN     ?= bin/torchmem
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
# Static (no libc: CGO_ENABLED=0), without local paths or debug tables; the
# version and commit are what torchmem --version prints.
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
GOBUILD := CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)"
DIST    ?= dist
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
FUZZTIME ?= 10m
# The folders of Go source gofmt checks (make test, make lint).
GOFMT_DIRS := cmd snapshot internal analysis result diff check rollup report tools
# The repository, for the wheels' Project-URL: the module's path.
PROJECT_URL ?= https://$(shell $(GO) list -m 2>/dev/null)

.PHONY: all build release wheels test bench bench-rollup fuzz lint demo demo-file echarts clean

all: build test

build:
	$(GOBUILD) -o $(BIN) ./cmd/torchmem

# Static binaries for Linux and macOS on amd64 and arm64, named
# torchmem-VERSION-OS-ARCH, and their SHA256SUMS, in $(DIST).
release:
	@mkdir -p $(DIST) && rm -f $(DIST)/torchmem-* $(DIST)/SHA256SUMS
	@for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=$(DIST)/torchmem-$(VERSION)-$$os-$$arch; \
		echo "$$out"; GOOS=$$os GOARCH=$$arch $(GOBUILD) -o $$out ./cmd/torchmem || exit 1; done
	@cd $(DIST) && if command -v sha256sum >/dev/null; then sha256sum torchmem-$(VERSION)-*; \
		else shasum -a 256 torchmem-$(VERSION)-*; fi > SHA256SUMS
	@echo "$(DIST)/SHA256SUMS"

# Python wheels of the release binaries (make release first), one per
# platform, in $(DIST) with them: `pip install` puts torchmem on the PATH,
# `python -m torchmem` runs it. The wheel's version is VERSION in PEP 440
# form (v1.2.3 -> 1.2.3; untagged builds get a local version, +g<commit>,
# which PyPI refuses). SHA256SUMS is written again to cover the wheels.
wheels: release
	@$(GO) run ./tools/wheel -version "$(VERSION)" -o $(DIST) -readme README.md -url "$(PROJECT_URL)" \
		-license LICENSE -license report/assets/LICENSE-echarts -license report/assets/NOTICE-echarts \
		-license report/assets/LICENSE-d3 -license-expression "Apache-2.0 AND BSD-3-Clause" \
		$(foreach p,$(PLATFORMS),$(DIST)/torchmem-$(VERSION)-$(subst /,-,$(p)))
	@cd $(DIST) && if command -v sha256sum >/dev/null; then sha256sum torchmem-*; \
		else shasum -a 256 torchmem-*; fi > SHA256SUMS
	@echo "$(DIST)/SHA256SUMS"

# Unit, golden and real-file tests. Real files are read from ../shared.
# -timeout 20m: the report package's browser tests took 303 s on a 2-core
# machine at load 20, half of go test's default of 10 minutes; the tests'
# own waits end shortly before this deadline (snapshottest.Context).
# The log is go test's own (packages, failed tests' output), ending with the
# tests that were skipped and why (tools/testlog): in CI, a skipped test
# is one that cannot fail.
test:
	@test -z "$$(gofmt -l $(GOFMT_DIRS))" || { echo "gofmt needed:"; gofmt -l $(GOFMT_DIRS); exit 1; }
	$(GO) vet ./...
	$(GO) build -o /dev/null ./tools/testlog
	@bash -o pipefail -c '$(GO) test -count=1 -timeout 20m -json ./... | $(GO) run ./tools/testlog'

# Benchmarks (speed and allocations): the largest real snapshot and trace,
# then generated inputs of about 10 MB, 100 MB and 1 GB (written once into
# $$TORCHMEM_BENCH_DIR or the temp folder; about 4 GB of disk); last, the
# torchmem command against CPython loading the same generated snapshots
# and trace, alternated, as a table (README, Performance).
bench:
	$(GO) test -run '^$$' -bench 'Largest|Reference' -benchmem -benchtime 5x ./internal/load/pickle/ ./internal/load/kineto/
	$(GO) test -run '^$$' -bench 'AnalyzeGenerated' -benchmem -benchtime 2x -timeout 60m ./analysis/
	$(GO) test -run '^$$' -bench 'Build' -benchmem ./rollup/
	$(GO) test -run '^$$' -bench 'AgainstPython' -benchtime 1x -timeout 60m ./cmd/torchmem/

# The roll-up at scale, apart from bench (minutes, about 6 GB of disk in
# $$TORCHMEM_BENCH_DIR or the temp folder): 256 generated ranks of 20 MB
# analysed in one command against each file alone (time and peak RSS of
# the whole process), and merge of 10,000 summaries.
bench-rollup:
	$(GO) test -run '^$$' -bench 'Rollup256|Merge10000' -benchtime 1x -timeout 120m ./cmd/torchmem/

# Fuzz every target for FUZZTIME each (not run in CI). Minimisation is off:
# Go's fuzzer spends up to a minute minimising each input that finds new
# coverage, counting no executions meanwhile (it stalled three of five 60 s
# runs); a crasher is still written to testdata/fuzz as found.
fuzz:
	@for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for t in $$($(GO) test -list 'Fuzz.*' $$pkg | grep ^Fuzz); do \
			echo "== $$pkg $$t"; $(GO) test -run '^$$' -timeout 0 -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0 $$pkg || exit 1; done; done

lint:
	@test -z "$$(gofmt -l $(GOFMT_DIRS))" || { gofmt -l $(GOFMT_DIRS); exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# What torchmem says about an OOM snapshot the repository ships (made by
# torchmem's own allocator simulator: testdata/demo/oom_snapshot.pickle).
demo: build
	$(BIN) analyze testdata/demo/oom_snapshot.pickle

# Regenerate the demo snapshot (a test checks it matches the generator).
demo-file:
	$(GO) run ./tools/gen demo -o testdata/demo/oom_snapshot.pickle

# Fetch the ECharts the HTML report embeds again, from npm (run by a
# developer, not in CI); a test checks the file's SHA-256 (report/html.go).
ECHARTS_VERSION ?= 5.6.0
echarts:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	npm pack --silent --pack-destination "$$tmp" echarts@$(ECHARTS_VERSION) >/dev/null && \
	tar -xzf "$$tmp/echarts-$(ECHARTS_VERSION).tgz" -C "$$tmp" && \
	cp "$$tmp/package/dist/echarts.min.js" report/assets/echarts.min.js && \
	cp "$$tmp/package/LICENSE" report/assets/LICENSE-echarts && \
	cp "$$tmp/package/NOTICE" report/assets/NOTICE-echarts && \
	cp "$$tmp/package/licenses/LICENSE-d3" report/assets/LICENSE-d3 && \
	sha256sum report/assets/echarts.min.js

clean:
	rm -rf bin dist
