package upfxdp

// PutEgress enters the interface ifindex of the calling thread's network
// namespace in egress_ports: the program sends the frames for it through
// that devmap, bulked per flush, rather than one by one with bpf_redirect.
// The kernel drops the entry when the interface goes away.
func (d *Datapath) PutEgress(ifindex uint32) error { return d.maps.EgressPorts.Put(ifindex, ifindex) }
