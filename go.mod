module github.com/xdp5g/xdp5g

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	github.com/gopacket/gopacket v1.3.1
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sys v0.43.0
	gopkg.in/yaml.v3 v3.0.1
)

require github.com/wmnsk/go-pfcp v0.0.24

require (
	github.com/emmansun/gmsm v0.34.0
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
)

require github.com/inconshreveable/mousetrap v1.1.0 // indirect

tool github.com/cilium/ebpf/cmd/bpf2go
