# sluice — see README.md. `make demo` generates text; `make test` runs the tests.
GO      ?= go
PKGS    ?= ./...
FUZZX   ?= 2000x
SHARED  ?= ../shared/models
BIN     := bin/sluice
export GOFLAGS ?= -trimpath

.PHONY: all build demo test test-purego test-simd test-kernels test-race test-all fuzz bench golden lint fmt fmt-check vet tidy-check ci clean

all: lint test-all

build:
	$(GO) build -o $(BIN) ./cmd/sluice

# demo: greedy generation from stories260K when ../shared/models is beside the
# clone, else from a small synthetic model the project writes itself.
demo: build
	@if [ -f $(SHARED)/stories260K/stories260K.bin ]; then \
		echo "# stories260K (../shared/models), greedy, 128 new tokens"; \
		./$(BIN) generate -m $(SHARED)/stories260K/stories260K.bin --tokenizer $(SHARED)/stories260K/tok512.bin --temp 0 -n 128 -p "Once upon a time"; \
	else \
		echo "# ../shared/models absent: synthetic model (random weights, so the text is noise)"; \
		./$(BIN) gen-model --preset tiny --seed 1 -o bin/demo-tiny.gguf && \
		./$(BIN) generate -m bin/demo-tiny.gguf --temp 0 -n 32 -p "hello"; \
	fi

test:
	@if [ -d $(SHARED)/stories260K ]; then echo "real-model tests: $(SHARED) present, running them"; \
	else echo "real-model tests: $(SHARED) absent, they skip (see -v for each)"; fi
	$(GO) test -count=1 $(PKGS)

test-purego:
	$(GO) test -count=1 -tags purego $(PKGS)

test-simd:
	GOEXPERIMENT=simd $(GO) test -count=1 $(PKGS)

# test-kernels: the kernel tests once per instruction-set cap (SLUICE_ISA), so
# an AVX-512 machine also runs the AVX2 and generic kernels; it prints which
# kernel set each run tested and every set it could not (CPU or build).
ISAS ?= avx512 avx2 generic
test-kernels:
	@for isa in $(ISAS); do \
		out=$$(SLUICE_ISA=$$isa $(GO) test -count=1 -v ./kernels/... 2>&1) || \
			{ echo "$$out" | grep -v '^=== \|--- PASS\|^PASS$$'; echo "kernels: SLUICE_ISA=$$isa FAILED"; exit 1; }; \
		echo "$$out" | grep -o 'kernels: SLUICE_ISA=.*'; \
		echo "$$out" | grep -o 'SKIP [a-z0-9]* .*' | sort -u | sed 's/^/  /'; \
	done

test-race:
	$(GO) test -count=1 -race -short $(PKGS)
	GOEXPERIMENT=simd $(GO) test -count=1 -race -short ./kernels/... ./decode/...

test-all: test test-purego test-simd test-kernels test-race

# Count-bounded fuzzing: deterministic CI cost.
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzGGUFHeader$$' -fuzztime=$(FUZZX) ./format/gguf
	$(GO) test -run='^$$' -fuzz='^FuzzLlama2cHeader$$' -fuzztime=$(FUZZX) ./format/llama2c
	$(GO) test -run='^$$' -fuzz='^FuzzTokenizerRoundTrip$$' -fuzztime=$(FUZZX) ./tokenizer
	$(GO) test -run='^$$' -fuzz='^FuzzPipelineTOML$$' -fuzztime=$(FUZZX) ./pipelines
	$(GO) test -run='^$$' -fuzz='^FuzzReader$$' -fuzztime=$(FUZZX) ./batch
	$(GO) test -run='^$$' -fuzz='^FuzzReadLlama2CVocab$$' -fuzztime=$(FUZZX) ./model/synth
	$(GO) test -run='^$$' -fuzz='^FuzzHeader$$' -fuzztime=$(FUZZX) ./format/safetensors
	$(GO) test -run='^$$' -fuzz='^FuzzParseLoraSpec$$' -fuzztime=$(FUZZX) ./cmd/sluice
	$(GO) test -run='^$$' -fuzz='^FuzzParseNM$$' -fuzztime=$(FUZZX) ./cmd/sluice
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeRow24$$' -fuzztime=$(FUZZX) ./compress/prune
	$(GO) test -run='^$$' -fuzz='^FuzzHFConfig$$' -fuzztime=$(FUZZX) ./convert

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
tidy-check:
	$(GO) mod tidy -diff

lint: fmt-check vet tidy-check

ci: lint test-all fuzz

clean:
	rm -rf bin bench.txt
