# xdp5g: `make demo` and `make test` are all a fresh machine needs.
SHELL := /bin/bash
GO ?= go
DEB_PACKAGES := clang llvm libbpf-dev bpftool iproute2 ethtool linux-libc-dev prometheus
BPF_SOURCES := $(shell find bpf -name '*.[ch]')
GENERATED := .generated

.PHONY: setup build generate test demo bench lint clean

# Idempotent and quiet once done: installs only what is missing.
setup:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@$(GO) mod download

$(GENERATED): $(BPF_SOURCES) $(shell find internal -name gen.go)
	$(GO) generate ./...
	@touch $@

generate: setup $(GENERATED)

build: generate
	$(GO) build -o bin/ ./cmd/xdp5g ./cmd/xdp5g-lab

lint: generate
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -run 'PassesVerifier' ./...

# The tests need root (namespaces, XDP); they run one package at a time
# because the machine has two cores and the end-to-end tests measure loss.
test: build lint
	$(GO) test -count=1 -p 1 -timeout 20m ./...

demo: build
	./bin/xdp5g demo

bench: build
	./bin/xdp5g-lab bench

clean:
	rm -rf bin $(GENERATED)
	find . -name '*_bpfel.go' -delete -o -name '*_bpfel.o' -delete
