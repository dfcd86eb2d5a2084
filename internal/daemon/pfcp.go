package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netns"
	"github.com/wmnsk/go-pfcp/message"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/platform/freebind"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
	"github.com/xdp5g/xdp5g/internal/upf/ippool"
	"github.com/xdp5g/xdp5g/internal/upf/n4"
	"github.com/xdp5g/xdp5g/internal/upf/pfcp"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// checkPFCPListen fails when the PFCP address cannot be bound. The server
// binds it only once the store exists; this check stops the start on a busy
// port before the data path is touched, as the API's listener does.
func checkPFCPListen(listen string) error {
	addr, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return fmt.Errorf("pfcp.listen: %w", err)
	}
	conn, err := freebind.ListenUDP("udp", addr.String())
	if err != nil {
		return fmt.Errorf("pfcp.listen: %w", err)
	}
	return conn.Close()
}

// servePFCP serves N4 over the UPF's store: the sessions SMFs establish
// live in it beside those of the REST API, and their usage is reported
// from the data path's counters. It takes up the PFCP state the store's
// sessions were restored from, or starts with a new Recovery Time Stamp.
// started is when the run started; reg takes the collectors of PFCP and
// GTP-U. Call stop before closing the store.
func servePFCP(cfg *config.Config, u *upf, ns netns.NsHandle, started time.Time,
	reg prometheus.Registerer, log *slog.Logger) (_ *api.PFCP, stop func() error, _ error) {
	p, store, buffers, st := cfg.PFCP, u.store, u.buffers, u.pfcp
	// Advertise exactly what the handler does: it chooses F-TEIDs, and UE
	// addresses when it has a pool.
	features := []pfcp.UPFeature{pfcp.FeatureFTUP}
	pool, pools, err := uePools(p)
	if err != nil {
		return nil, nil, err
	}
	if pool != nil || len(pools) > 0 {
		features = append(features, pfcp.FeatureUEIP)
	}
	// URRs count packets and report a quota's validity time; BARs may delay
	// Downlink Data Reports; FARs may send the downlink to the CP function
	// for it to buffer (N4-u).
	features = append(features, pfcp.FeatureMNOP, pfcp.FeatureVTIME, pfcp.FeatureDDND, pfcp.FeatureBUCP)
	if len(p.ForwardingPolicies) > 0 { // FARs may steer to their next hops
		features = append(features, pfcp.FeatureTRST)
	}
	// The N3 endpoint comes first (the handler uses it) and may hear from
	// a gNB before the handler and the server exist: until then there is
	// no session to report on.
	var srv atomic.Pointer[pfcp.Server]
	var handler atomic.Pointer[n4.Handler]
	ctx, cancel := context.WithCancel(context.Background())
	tunnels := openTunnels(cfg, u.dp, ns, reg, log, injectGPDUs(ctx, u.dp, ns, log),
		func(ei gtpu.ErrorIndication) {
			if h := handler.Load(); h != nil {
				h.ErrorIndication(ei)
			}
		},
		func(m gtpu.EndMarker) {
			if h := handler.Load(); h != nil {
				h.EndMarker(m)
			}
		},
		func(p gtpu.Path, failed bool) {
			if s := srv.Load(); s != nil {
				if err := s.ReportPath(ctx, p.Peer, failed); err != nil {
					log.Warn("reporting a GTP-U path", "peer", p.Peer, "failed", failed, "err", err)
				}
			}
		})
	ncfg := n4.Config{Store: store, N3: cfg.N3Addresses, N9: cfg.N9Addresses, SEIDAddress: p.SEIDAddress(), N9Instances: p.N9NetworkInstances, UEPool: pool, UEPools: pools, Buffers: buffers, Log: log,
		TrafficStopAfter: p.TrafficStopAfter, ForwardingPolicies: p.ForwardingPolicies,
		Journal: st.log, Restored: st.sessions, Repaired: st.repaired,
		SendReport: func(ctx context.Context, peer pfcp.Peer, req *message.SessionReportRequest) (*message.SessionReportResponse, error) {
			return srv.Load().SendSessionReport(ctx, peer, req) // reports start once the server runs
		},
		Sequence: func() uint32 {
			if s := srv.Load(); s != nil {
				return s.NextSequence()
			}
			return 0 // a report before the server runs (a buffered packet's): SendReport numbers it
		}}
	if tunnels != nil {
		ncfg.Tunnels = tunnels
		features = append(features, pfcp.FeatureEMPU) // End Markers on SNDEM
	}
	h := n4.New(ncfg)
	handler.Store(h)
	buffers.SetNotify(h.Buffered)
	closeTunnels := func() {
		if tunnels != nil {
			tunnels.Close()
		}
	}
	events, err := u.dp.URREvents()
	if err != nil {
		cancel()
		closeTunnels()
		return nil, nil, err
	}
	// A new Recovery Time Stamp, the time of pfcp.New, counts whole
	// seconds. The previous run's is no later than the second this run
	// started in: from the next one on, ours is later, and the SMFs see the
	// restart even when it took less than a second.
	if !st.restored() {
		time.Sleep(time.Until(started.Truncate(time.Second).Add(time.Second)))
	}
	server, err := pfcp.New(pfcp.Config{
		Listen:            p.Listen,
		NodeID:            p.NodeID,
		Peers:             p.Peers,
		AllowedPeers:      p.AllowedPeers,
		Features:          features,
		HeartbeatInterval: p.HeartbeatInterval,
		T1:                p.T1,
		N1:                p.N1,
		Handler:           h,
		Journal:           st.log,
		Restored:          st.server,
		Log:               log,
	})
	if err != nil {
		cancel()
		closeTunnels()
		events.Close()
		return nil, nil, err
	}
	srv.Store(server)
	reg.MustRegister(server.Metrics())
	if tunnels != nil {
		reg.MustRegister(tunnels.Metrics())
	}
	st.log.Compact(server.Snapshot, h.Snapshot)
	reporting := make(chan struct{})
	go func() {
		defer close(reporting)
		h.Run(ctx, events)
	}()
	stop = func() error {
		err := server.Close() // first: no request changes the sessions' tunnels any more
		closeTunnels()
		cancel()
		<-reporting
		return err
	}
	attrs := []any{"listen", server.Addr().String(), "node_id", p.NodeID, "peers", p.Peers, "allowed_peers", p.AllowedPeers,
		"recovery_time_stamp", server.Recovery().UTC().Format(time.RFC3339), "ready_after", time.Since(started).Round(time.Millisecond)}
	if pool != nil {
		attrs = append(attrs, "ue_pool", p.UEPool)
	}
	if len(pools) > 0 {
		attrs = append(attrs, "ue_pools", p.UEPools)
	}
	if len(p.N9NetworkInstances) > 0 {
		attrs = append(attrs, "n9_network_instances", p.N9NetworkInstances)
	}
	log.Info("serving PFCP", attrs...)
	// An address on no interface yet binds all the same: the start names
	// it, as it names N3 and N9 ones, and a typo shows there.
	if a := server.Addr().Addr().Unmap(); !a.IsUnspecified() {
		if present, err := interfaceAddrs(); err == nil && !slices.Contains(present, a) {
			log.Info("PFCP address on no interface yet: N4 is served there once it is added", "address", a)
		}
	}
	return &api.PFCP{Server: server, Sessions: h}, stop, nil
}

// uePools makes the UE address pools: the default one (nil if unset) and
// those of network instances.
func uePools(p *config.PFCP) (*ippool.Pool, map[string]*ippool.Pool, error) {
	var pool *ippool.Pool
	if p.UEPool.IsValid() {
		var err error
		if pool, err = ippool.New(p.UEPool); err != nil {
			return nil, nil, fmt.Errorf("pfcp.ue_pool: %w", err)
		}
	}
	pools := map[string]*ippool.Pool{}
	for name, prefix := range p.UEPools {
		var err error
		if pools[name], err = ippool.New(prefix); err != nil {
			return nil, nil, fmt.Errorf("pfcp.ue_pools[%q]: %w", name, err)
		}
	}
	return pool, pools, nil
}

// openTunnels opens the GTP-U signalling endpoint, on the N3 and N9
// addresses, in the interfaces' namespace: Error Indications from gNBs and
// other UPFs and to them, echo supervision of the paths to them, End
// Markers. On an address it cannot bind (its port taken, say) the UPF
// forwards as before and the start says what it cannot do there; nil when
// it bound none.
func openTunnels(cfg *config.Config, dp *upfxdp.Datapath, ns netns.NsHandle, reg prometheus.Registerer, log *slog.Logger, gpdu func(netip.Addr, netip.AddrPort, int, []byte),
	errorIndication func(gtpu.ErrorIndication), endMarker func(gtpu.EndMarker), path func(p gtpu.Path, failed bool)) *gtpu.Endpoint {
	return openGTPU(cfg, dp, ns, reg, log, "Error Indications, path supervision, Echo Responses over IPv6, End Markers and fragmented G-PDUs",
		gtpu.Config{OnGPDU: gpdu, OnErrorIndication: errorIndication, OnEndMarker: endMarker,
			EchoInterval: cfg.PFCP.GTPUEchoInterval, EchoRetries: cfg.PFCP.GTPUEchoRetries,
			OnPathFailure:  func(p gtpu.Path) { path(p, true) },
			OnPathRecovery: func(p gtpu.Path) { path(p, false) }})
}

// serveFragmentedGPDUs opens, for a UPF without PFCP, the socket on the
// GTP-U port of its N3 and N9 addresses that the kernel hands G-PDUs it
// put together from fragments to, which injectGPDUs forwards, and G-PDUs
// to unknown TEIDs, which it answers with Error Indications; the PFCP
// side's signalling endpoint does that with PFCP. stop closes it.
func serveFragmentedGPDUs(cfg *config.Config, dp *upfxdp.Datapath, ns netns.NsHandle, reg prometheus.Registerer, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	e := openGTPU(cfg, dp, ns, reg, log, "fragmented G-PDUs and Error Indications", gtpu.Config{OnGPDU: injectGPDUs(ctx, dp, ns, log)})
	if e != nil {
		reg.MustRegister(e.Metrics())
	}
	return func() {
		if e != nil {
			e.Close()
		}
		cancel()
	}
}

// openGTPU opens a GTP-U endpoint of cfg on the N3 and N9 addresses in ns,
// which answers the G-PDUs to TEIDs that dp does not know. Each address
// binds on its own, whether on an interface yet or not (one
// that is not is logged, as a typo would be): one that cannot be bound is
// logged, with what is lost on it, and counted in reg, and the others
// serve. Nil when none could be bound.
func openGTPU(cfg *config.Config, dp *upfxdp.Datapath, ns netns.NsHandle, reg prometheus.Registerer, log *slog.Logger, lost string, gcfg gtpu.Config) *gtpu.Endpoint {
	gcfg.Local, gcfg.Log = slices.Concat(cfg.N3Addresses, cfg.N9Addresses), log
	gcfg.ErrorIndicationRate = int(cfg.Datapath.ErrorIndicationRate)
	gcfg.TEIDKnown = func(local netip.Addr, teid uint32) bool {
		// Known unless the data path says for sure it is not.
		_, err := dp.Uplink(upfxdp.FTEID{Addr: local, TEID: teid})
		return !errors.Is(err, ebpf.ErrKeyNotExist)
	}
	var e *gtpu.Endpoint
	var present []netip.Addr // on the interfaces of ns
	var listed error
	if err := inNetns(ns, func() (err error) {
		if e, err = gtpu.Open(gcfg); err == nil {
			present, listed = interfaceAddrs()
		}
		return err
	}); err != nil {
		log.Warn("no GTP-U socket on any N3 or N9 address", "lost", lost, "err", err)
		return nil
	}
	unbound := e.Unbound()
	reg.MustRegister(gtpu.UnboundMetrics(unbound))
	for _, a := range gcfg.Local {
		if err, ok := unbound[a]; ok {
			log.Warn("no GTP-U socket on an N3 or N9 address", "address", a, "lost", lost, "err", err)
		} else if listed == nil && !slices.Contains(present, a) {
			log.Info("N3 or N9 address on no interface yet: its GTP-U socket serves once it is added", "address", a)
		}
	}
	if len(unbound) == len(gcfg.Local) {
		e.Close()
		return nil
	}
	return e
}

// interfaceAddrs are the addresses of the interfaces in the calling
// thread's network namespace.
func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	var out []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, err
}

// injectGPDUs has the data path forward the G-PDUs that the kernel put
// together from their fragments and the N3 socket receives whole, as if
// they had come in whole by the interface their fragments came in by: the
// UPF's program there decides, as for any G-PDU. One goroutine in the
// interfaces' namespace, where the kernel finds that interface, runs them
// through in turn until ctx ends; what finds its queue full is dropped.
func injectGPDUs(ctx context.Context, dp *upfxdp.Datapath, ns netns.NsHandle,
	log *slog.Logger) func(netip.Addr, netip.AddrPort, int, []byte) {
	type gpdu struct {
		from, to netip.Addr
		ifindex  int
		datagram []byte
	}
	queue := make(chan gpdu, 1024)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, in ns
		if ns.IsOpen() {
			if err := netns.Set(ns); err != nil {
				log.Warn("fragmented G-PDUs are not forwarded", "err", err)
				return
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case g := <-queue:
				iface, err := net.InterfaceByIndex(g.ifindex)
				if err == nil {
					err = dp.InjectGPDU(iface, g.from, g.to, g.datagram)
				}
				if err != nil {
					log.Debug("a fragmented G-PDU not forwarded", "from", g.from, "err", err)
				}
			}
		}
	}()
	return func(local netip.Addr, from netip.AddrPort, ifindex int, datagram []byte) {
		select {
		case queue <- gpdu{from: from.Addr().Unmap(), to: local, ifindex: ifindex, datagram: slices.Clone(datagram)}:
		default:
		}
	}
}
