package daemon

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/ippool"
	"github.com/xdp5g/xdp5g/internal/n4"
	"github.com/xdp5g/xdp5g/internal/pfcp"
	"github.com/xdp5g/xdp5g/internal/session"
)

// checkPFCPListen fails when the PFCP address cannot be bound. The server
// binds it only once the store exists; this check stops the start on a busy
// port before the data path is touched, as the API's listener does.
func checkPFCPListen(listen string) error {
	addr, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return fmt.Errorf("pfcp.listen: %w", err)
	}
	conn, err := net.ListenUDP("udp", addr)
	if err != nil {
		return fmt.Errorf("pfcp.listen: %w", err)
	}
	return conn.Close()
}

// servePFCP serves N4 over the store: the sessions SMFs establish live in
// it beside those of the REST API. Close the returned server before the
// store.
func servePFCP(cfg *config.Config, store *session.Store, log *slog.Logger) (*api.PFCP, error) {
	p := cfg.PFCP
	// Advertise exactly what the handler does: it chooses F-TEIDs, and UE
	// addresses when it has a pool.
	features := []pfcp.UPFeature{pfcp.FeatureFTUP}
	var pool *ippool.Pool
	if p.UEPool.IsValid() {
		var err error
		if pool, err = ippool.New(p.UEPool); err != nil {
			return nil, fmt.Errorf("pfcp.ue_pool: %w", err)
		}
		features = append(features, pfcp.FeatureUEIP)
	}
	handler := n4.New(n4.Config{Store: store, N3: cfg.N3Addresses, UEPool: pool, Log: log})
	srv, err := pfcp.New(pfcp.Config{
		Listen:            p.Listen,
		NodeID:            p.NodeID,
		Peers:             p.Peers,
		Features:          features,
		HeartbeatInterval: p.HeartbeatInterval,
		T1:                p.T1,
		N1:                p.N1,
		Handler:           handler,
		Log:               log,
	})
	if err != nil {
		return nil, err
	}
	attrs := []any{"listen", srv.Addr().String(), "node_id", p.NodeID, "peers", p.Peers}
	if pool != nil {
		attrs = append(attrs, "ue_pool", p.UEPool)
	}
	log.Info("serving PFCP", attrs...)
	return &api.PFCP{Server: srv, Sessions: handler}, nil
}
