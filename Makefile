# sluice — see README.md. `make demo` generates text; `make test` runs the tests.
GO      ?= go
PKGS    ?= ./...
FUZZX   ?= 2000x
SHARED  ?= ../shared/models
BIN     := bin/sluice
export GOFLAGS ?= -trimpath

.PHONY: all build demo test test-etl test-etl-portable test-purego test-simd test-kernels test-arm64 test-race test-all fuzz fuzz-check bench golden lint fmt fmt-check vet tidy-check ci clean

all: lint test-all

build:
	$(GO) build -o $(BIN) ./cmd/sluice

# demo: greedy generation from stories260K, which the repository carries
# (models/; see models/README.md for its source and licence).
demo: build
	@./$(BIN) version | tail -1
	@echo "# stories260K (models/), greedy, 128 new tokens"
	@./$(BIN) generate -m models/stories260K/stories260K.bin --tokenizer models/stories260K/tok512.bin --temp 0 -n 128 -p "Once upon a time"

test:
	@if [ -d $(SHARED)/stories260K ]; then echo "real-model tests: on $(SHARED)"; \
	else echo "real-model tests: on models/ ($(SHARED) absent: the tests of its vocab-only files skip, see -v)"; fi
	$(GO) test -count=1 $(PKGS)

# test-etl: the Beam module etl/ (its own go.mod): vet, tidiness and its
# tests on the prism runner. About 10 s with a warm build cache; about 6 min
# on 2 cores with a cold one (the Beam SDK's ~170 modules compile once).
test-etl:
	cd etl && $(GO) vet ./... && $(GO) mod tidy -diff && $(GO) test -count=1 ./...

# test-etl-portable: the example pipeline through a real job server, the
# path Flink, Spark and Dataflow take: prism (the Beam SDK's own runner,
# built from the module etl/ already requires) runs as its own process, and
# the sluice-beam binary submits the job to it with --runner universal and a
# LOOPBACK worker environment, so the job crosses the Fn API serialized
# (TestPortableJobServer). About 12 s once test-etl has warmed the build cache (the prism build itself about 2.5 min cold on 2 cores).
test-etl-portable:
	cd etl && $(GO) build -o ../bin/prism github.com/apache/beam/sdks/v2/go/cmd/prism && $(GO) build -o ../bin/sluice-beam ./cmd/sluice-beam
	cd etl && SLUICE_PRISM=$(CURDIR)/bin/prism SLUICE_BEAM=$(CURDIR)/bin/sluice-beam $(GO) test -count=1 -run '^TestPortableJobServer$$' -v ./cmd/sluice-beam

# The purego and simd builds run the short forms of the end-to-end tests (the
# same checks over fewer tokens and seeds); the default build runs them whole.
test-purego:
	$(GO) test -count=1 -short -tags purego $(PKGS)

test-simd:
	GOEXPERIMENT=simd $(GO) test -count=1 -short $(PKGS)

# test-kernels: the kernel tests once per instruction-set cap (SLUICE_ISA), so
# an AVX-512 machine also runs the AVX2 and generic kernels; it prints which
# kernel set each run tested and every set it could not (CPU or build).
ISAS ?= avx512-amx avx512 avx2 generic
test-kernels:
	@for isa in $(ISAS); do \
		out=$$(SLUICE_ISA=$$isa $(GO) test -count=1 -v ./kernels/... 2>&1) || \
			{ echo "$$out" | grep -v '^=== \|--- PASS\|^PASS$$'; echo "kernels: SLUICE_ISA=$$isa FAILED"; exit 1; }; \
		echo "$$out" | grep -o 'kernels: SLUICE_ISA=.*'; \
		echo "$$out" | grep -o 'SKIP [a-z0-9-]* .*' | sort -u | sed 's/^/  /'; \
	done

# test-arm64: the kernel tests built for GOARCH=arm64 and run under qemu-user
# (Debian's qemu-user-static; .ci/run installs it), once per NEON kernel set,
# each asserted to be the set that ran (SLUICE_EXPECT_ISA: TestImpl fails on
# any other). qemu's default CPU ("max") has the dot-product extension; its
# Cortex-A53 has not, so plain NEON is tested both under the SLUICE_ISA cap
# and as what feature detection picks. Then end-to-end checks on the
# dot-product set: stories260K's greedy text equals llama2.c's and its logits
# ref's (TestEngineMatchesRef), a Q4_K/Q6_K model's engine logits stay within
# 5% relative RMS of ref's (TestKQuantGGUFLoads, fast K-quant kernels), and every
# architecture's greedy ids equal llama.cpp's at F32 and Q8_0 (model/archs, -short: its
# tiny-k Q4_K_M column holds ids that equal llama.cpp's on the amd64 sets' float order; under
# NEON's, qwen3's parts from them at a near-tie of 0.2%, which that test reports).
# About 3 minutes on 2 cores.
QEMU_ARM64 ?= qemu-aarch64-static
# qemu CPU : the set it must select : SLUICE_ISA cap (empty: none)
ARM64_RUNS ?= max:neon-dotprod: max:neon:neon cortex-a53:neon:
arm64test = QEMU_CPU=$(1) GOARCH=arm64 $(GO) test -exec $(QEMU_ARM64) -count=1
test-arm64:
	@command -v $(QEMU_ARM64) >/dev/null || { echo "test-arm64: $(QEMU_ARM64) not found (apt-get install qemu-user-static)"; exit 1; }
	@for run in $(ARM64_RUNS); do \
		cpu=$${run%%:*}; rest=$${run#*:}; want=$${rest%%:*}; cap=$${rest#*:}; \
		out=$$(SLUICE_ISA=$$cap SLUICE_EXPECT_ISA=$$want $(call arm64test,$$cpu) -short -v ./kernels/... 2>&1) || \
			{ echo "$$out" | grep -v '^=== \|--- PASS\|^PASS$$'; echo "arm64 kernels: qemu cpu $$cpu, SLUICE_ISA=$$cap FAILED"; exit 1; }; \
		echo "arm64 (qemu cpu $$cpu) $$(echo "$$out" | grep -o 'kernels: SLUICE_ISA=.*')"; \
		echo "$$out" | grep -o 'SKIP [a-z0-9-]* .*' | sort -u | sed 's/^/  /'; \
		echo "$$out" | grep '^ok\|^FAIL' | sed 's/^/  /'; \
	done
	@echo "arm64 end-to-end (qemu cpu max, neon-dotprod kernels):"
	@SLUICE_EXPECT_ISA=neon-dotprod $(call arm64test,max) -run 'TestImpl$$|TestEngineMatchesRef|TestKQuantGGUFLoads' . ./kernels ./model/ref
	@$(call arm64test,max) -short ./model/archs

test-race:
	$(GO) test -count=1 -race -short $(PKGS)
	GOEXPERIMENT=simd $(GO) test -count=1 -race -short ./kernels/... ./sched/... ./session/...

test-all: test test-purego test-simd test-kernels test-race

# Count-bounded fuzzing: deterministic CI cost. Every `func Fuzz` in the repo
# runs here (fuzz-check, part of lint, fails when one is missing). FUZZX is
# the count per target; the slow ones (a random cache program, a synctest
# loop per input) take FUZZX_SLOW.
FUZZX_SLOW ?= 300x
fuzz1 = $(GO) test -run='^$$' -fuzz='^$(1)$$' -fuzztime=$(if $(3),$(3),$(FUZZX)) ./$(2)
fuzz:
	$(call fuzz1,FuzzGGUFHeader,format/gguf)
	$(call fuzz1,FuzzLlama2cHeader,format/llama2c)
	$(call fuzz1,FuzzHeader,format/safetensors)
	$(call fuzz1,FuzzTokenizerRoundTrip,tokenizer)
	$(call fuzz1,FuzzReadLlama2C,tokenizer)
	$(call fuzz1,FuzzSplitGPT2,tokenizer)
	$(call fuzz1,FuzzBPERoundTrip,tokenizer)
	$(call fuzz1,FuzzReadLlama2CVocab,tokenizer)
	$(call fuzz1,FuzzPreTokenize,tokenizer)
	$(call fuzz1,FuzzParseHFTokenizer,tokenizer)
	$(call fuzz1,FuzzPipelineTOML,pipelines)
	$(call fuzz1,FuzzReader,batch)
	$(call fuzz1,FuzzDone,batch)
	$(call fuzz1,FuzzParseLoraSpec,cmd/sluice)
	$(call fuzz1,FuzzParseNM,cmd/sluice)
	$(call fuzz1,FuzzDecodeRow24,compress/prune)
	$(call fuzz1,FuzzDecode24,compress/prune)
	$(call fuzz1,FuzzParseScheme,compress/quant)
	$(call fuzz1,FuzzDequantizeRow,compress/quant)
	$(call fuzz1,FuzzConfig,compress/lora)
	$(call fuzz1,FuzzHFConfig,convert)
	$(call fuzz1,FuzzDist,sample)
	$(call fuzz1,FuzzMatVec,kernels)
	$(call fuzz1,FuzzAttentionMask,kernels)
	$(call fuzz1,FuzzCacheOps,kvcache,$(FUZZX_SLOW))
	$(call fuzz1,FuzzPrefixOps,kvcache,$(FUZZX_SLOW))
	$(call fuzz1,FuzzLoop,graph,$(FUZZX_SLOW))
	$(call fuzz1,FuzzChatCompletions,server,$(FUZZX_SLOW))
	$(call fuzz1,FuzzParseCalls,server)
	$(call fuzz1,FuzzParseGBNF,grammar)
	$(call fuzz1,FuzzFromJSONSchema,grammar)
	$(call fuzz1,FuzzMatcher,grammar,$(FUZZX_SLOW))
	$(call fuzz1,FuzzParseShape,model/synth)
	$(call fuzz1,FuzzParseTreeBudget,pipelines)

fuzz-check:
	@missing=$$(grep -rl --include='*_test.go' '^func Fuzz' . | while read f; do \
		d=$${f%/*}; d=$${d#./}; \
		for n in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			grep -Eq "fuzz1,$$n,$$d(,|\))" Makefile || echo "  $$n in ./$$d"; \
		done; done); \
	if [ -n "$$missing" ]; then echo "fuzz targets missing from 'make fuzz':"; echo "$$missing"; exit 1; fi

bench:
	$(GO) test -run='^$$' -bench=. -benchmem -count=6 ./kernels/... ./sample/... | tee bench.txt

golden:
	UPDATE_GOLDEN=1 $(GO) test -count=1 -run=Golden $(PKGS)

fmt:
	gofmt -s -w .
fmt-check:
	@out=$$(gofmt -s -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
vet:
	$(GO) vet $(PKGS)
	GOEXPERIMENT=simd $(GO) vet ./kernels/...
	GOARCH=arm64 $(GO) vet ./kernels/...
tidy-check:
	$(GO) mod tidy -diff

lint: fmt-check vet tidy-check fuzz-check

ci: lint test-all test-arm64 test-etl test-etl-portable fuzz

clean:
	rm -rf bin bench.txt
