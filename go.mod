module github.com/xdp5g/xdp5g

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/gopacket/gopacket v1.3.1 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	github.com/wmnsk/go-pfcp v0.0.24 // indirect
	golang.org/x/sys v0.43.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
