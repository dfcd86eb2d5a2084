# xdp5g: `make demo` and `make test` are all a fresh machine needs.
SHELL := /bin/bash
GO ?= go
DEB_PACKAGES := clang llvm libbpf-dev bpftool iproute2 ethtool linux-libc-dev prometheus podman runc ca-certificates
BPF_SOURCES := $(shell find bpf -name '*.[ch]')
GENERATED := .generated

.PHONY: setup build generate image install test demo bench lint clean

# The image: `make image IMAGE=registry.example.net/xdp5g:1.0`. By default
# tagged with the Helm chart's appVersion, the tag the chart runs.
APP_VERSION := $(shell sed -n 's/^appVersion: *//p' deploy/helm/xdp5g/Chart.yaml | tr -d '"')
IMAGE ?= localhost/xdp5g:$(APP_VERSION)
PODMAN ?= podman
# Podman as this kind of machine runs it (deploy/podman/containers.conf).
export CONTAINERS_CONF ?= $(CURDIR)/deploy/podman/containers.conf
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# What `xdp5g --version`, the daemon's log and xdp5g_build_info say.
STAMP := -X github.com/xdp5g/xdp5g/internal/platform/version.stamped=$(VERSION)
OCI_ANNOTATIONS := org.opencontainers.image.source=https://github.com/xdp5g/xdp5g \
	org.opencontainers.image.revision=$(REVISION) org.opencontainers.image.version=$(VERSION) \
	org.opencontainers.image.title=xdp5g
IMAGE_DESCRIPTION := org.opencontainers.image.description=XDP-accelerated 5G user plane: UPF, classifier, CU-UP
# Where `make install` puts the binary and the systemd unit.
PREFIX ?= /usr/local

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
	$(GO) build -ldflags='$(STAMP)' -o bin/ ./cmd/xdp5g ./cmd/xdp5g-lab

# A static binary (its BPF objects embedded by bpf2go) on an empty base.
image: generate
	@mkdir -p bin/image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w $(STAMP)' -o bin/image/xdp5g ./cmd/xdp5g
	cp /etc/ssl/certs/ca-certificates.crt bin/image/
	@# The image it replaces goes, unless a container uses it.
	old=$$($(PODMAN) image inspect --format '{{.Id}}' $(IMAGE) 2>/dev/null); \
	$(PODMAN) build --quiet --layers=false --format oci -f deploy/image/Containerfile -t $(IMAGE) \
		$(foreach a,$(OCI_ANNOTATIONS),--label $(a) --annotation $(a)) \
		--label "$(IMAGE_DESCRIPTION)" --annotation "$(IMAGE_DESCRIPTION)" bin/image && \
	if [ -n "$$old" ] && [ "$$old" != "$$($(PODMAN) image inspect --format '{{.Id}}' $(IMAGE))" ]; then \
		$(PODMAN) rmi "$$old" >/dev/null 2>&1 || true; \
	fi
	@echo "$(IMAGE): $$($(PODMAN) image inspect --format '{{.Size}}' $(IMAGE) | numfmt --to=iec-i --suffix=B), version $(VERSION)"

# The daemon as a systemd service (deploy/systemd/xdp5g.service); an
# existing /etc/xdp5g/xdp5g.yaml is kept.
install: build
	install -D -m 0755 bin/xdp5g $(DESTDIR)$(PREFIX)/bin/xdp5g
	sed 's|/usr/local/bin/|$(PREFIX)/bin/|' deploy/systemd/xdp5g.service | install -D -m 0644 /dev/stdin $(DESTDIR)/etc/systemd/system/xdp5g.service
	install -d -m 0750 $(DESTDIR)/etc/xdp5g
	[ -e $(DESTDIR)/etc/xdp5g/xdp5g.yaml ] || install -m 0640 docs/xdp5g.example.yaml $(DESTDIR)/etc/xdp5g/xdp5g.yaml
	if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

lint: generate
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt: $$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -run 'PassesVerifier' ./...

# The tests need root (namespaces, XDP); they run one package at a time
# because the machine has two cores and the end-to-end tests measure loss.
# The container test runs the image (XDP5G_IMAGE) where podman can build and
# run it; elsewhere it is skipped, and this says so.
test: build lint
	@if $(MAKE) --no-print-directory image && $(PODMAN) run --rm --network none $(IMAGE) --help >/dev/null; then \
		export XDP5G_IMAGE=$(IMAGE); \
	else \
		echo "SKIPPED: the container test; podman cannot build or run the image on this machine (see above)"; \
	fi; \
	$(GO) test -count=1 -p 1 -timeout 20m ./...

demo: build
	./bin/xdp5g demo

bench: build
	./bin/xdp5g-lab bench

clean:
	rm -rf bin $(GENERATED)
	find . -name '*_bpfel.go' -delete -o -name '*_bpfel.o' -delete
