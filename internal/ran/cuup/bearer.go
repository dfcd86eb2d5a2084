package cuup

import (
	"fmt"
	"sync"
	"time"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
	"github.com/xdp5g/xdp5g/internal/ran/nrsec"
	"github.com/xdp5g/xdp5g/internal/ran/nru"
	"github.com/xdp5g/xdp5g/internal/ran/pdcp"
	"github.com/xdp5g/xdp5g/internal/ran/sdap"
)

// queueLimit bounds the downlink SDUs a DRB holds while the DU's flow
// control stops it.
const queueLimit = 1024

// keys are a UE's algorithms under its UP keys; nil where the UE has none
// (NEA0 ciphers nothing, so it is nil too).
type keys struct {
	cipher    nrsec.Cipher
	integrity nrsec.Integrity
}

func newKeys(s e1.SecurityInformation) (keys, error) {
	var k keys
	var err error
	if s.Algorithm.Ciphering != 0 {
		if k.cipher, err = nrsec.NewCipher(nrsec.Algorithm(s.Algorithm.Ciphering), s.Key.Encryption.Algorithm128()); err != nil {
			return keys{}, fielderr.New("securityInformation", "%v", err)
		}
	}
	if s.Algorithm.Integrity != nil {
		if k.integrity, err = nrsec.NewIntegrity(nrsec.Algorithm(*s.Algorithm.Integrity), s.Key.Integrity.Algorithm128()); err != nil {
			return keys{}, fielderr.New("securityInformation", "%v", err)
		}
	}
	return k, nil
}

// drbState is what the data path changes of a DRB, under its lock: workers
// of several queues may carry its packets.
type drbState struct {
	mu    sync.Mutex
	tx    *pdcp.Transmitter // downlink
	rx    *pdcp.Receiver    // uplink
	queue *pdcp.Queue[[]byte]
	nruSN uint32 // the next NR-U SN
	// credit is how many octets the DU takes before its next DL DATA
	// DELIVERY STATUS; unlimited until the first.
	credit  int64
	limited bool
	status  nru.DeliveryStatus // the last, decoded in place
	// scheduled is the deadline the timer set holds for the DRB; zero
	// when none.
	scheduled time.Time
	// worker is the one whose packet the receiver is handling: where it
	// delivers.
	worker *Worker
	stats  DRBStats
}

// DRBStats are what a DRB carried.
type DRBStats struct {
	DownlinkSDUs  uint64          `json:"downlinkSdus"`
	DownlinkBytes uint64          `json:"downlinkBytes"` // of the SDUs
	Queued        uint64          `json:"queued"`        // held for the DU's flow control
	QueueDropped  uint64          `json:"queueDropped"`  // with the queue full
	NoDUTunnel    uint64          `json:"noDuTunnel"`    // before the DU's tunnel was known
	UplinkSDUs    uint64          `json:"uplinkSdus"`
	UplinkBytes   uint64          `json:"uplinkBytes"`
	EndMarkers    uint64          `json:"endMarkers"`
	StatusReports uint64          `json:"deliveryStatusReports"` // DL DATA DELIVERY STATUS received
	DesiredBuffer uint32          `json:"desiredBufferSize"`     // in the last one
	PDCPTx        pdcp.TxStats    `json:"pdcpTx"`
	PDCPRx        pdcp.RxStats    `json:"pdcpRx"`
	DiscardQueue  pdcp.QueueStats `json:"discardQueue"`
}

// read is a DRB's figures, its PDCP entities' among them.
func (st *drbState) read() DRBStats {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.stats
	s.PDCPTx, s.PDCPRx, s.DiscardQueue = st.tx.Stats(), st.rx.Stats(), st.queue.Stats()
	return s
}

// start builds a DRB's PDCP entities under the session's security.
func (d *drb) start(ps *pduSession, k keys) error {
	cfg := d.cfg
	var cipher pdcp.Cipher
	var integrity pdcp.Integrity
	if ps.ciphering && k.cipher != nil {
		cipher = k.cipher
	}
	if ps.integrity {
		integrity = k.integrity
	}
	tx, err := pdcp.NewTransmitter(pdcp.Config{SNSize: int(cfg.PDCP.SNSizeDL), DRB: cfg.ID, Direction: pdcp.Downlink,
		Cipher: cipher, Integrity: integrity, SDAPHeader: cfg.SDAP.HeaderDL})
	if err != nil {
		return err
	}
	rx, err := pdcp.NewReceiver(pdcp.RxConfig{
		Config: pdcp.Config{SNSize: int(cfg.PDCP.SNSizeUL), DRB: cfg.ID, Direction: pdcp.Uplink,
			Cipher: cipher, Integrity: integrity, SDAPHeader: cfg.SDAP.HeaderUL},
		TReordering:        milliseconds(cfg.PDCP.TReordering),
		OutOfOrderDelivery: cfg.PDCP.OutOfOrderDelivery,
		Deliver:            d.deliver,
	})
	if err != nil {
		return err
	}
	queue, err := pdcp.NewQueue(queueLimit, milliseconds(cfg.PDCP.DiscardTimer), func([]byte) {})
	if err != nil {
		return err
	}
	d.state = &drbState{tx: tx, rx: rx, queue: queue}
	return nil
}

// milliseconds is a PDCP timer; absent is infinity.
func milliseconds(ms *uint16) time.Duration {
	if ms == nil {
		return pdcp.Infinity
	}
	return time.Duration(*ms) * time.Millisecond
}

// newSDAP builds the SDAP entity of a session's DRBs.
func newSDAP(drbs map[uint8]*drb) (*sdap.Session, error) {
	var cfg sdap.Config
	for _, d := range drbs {
		s := sdap.DRB{ID: d.cfg.ID, HeaderDL: d.cfg.SDAP.HeaderDL, HeaderUL: d.cfg.SDAP.HeaderUL}
		for _, f := range d.cfg.QoSFlows {
			s.Flows = append(s.Flows, sdap.Flow{QFI: f.QFI, RDI: f.ReflectiveMapping})
		}
		cfg.DRBs = append(cfg.DRBs, s)
		if d.cfg.SDAP.DefaultDRB {
			cfg.DefaultDRB = d.cfg.ID
		}
	}
	s, err := sdap.NewSession(cfg)
	if err != nil {
		return nil, fmt.Errorf("SDAP: %w", err)
	}
	return s, nil
}
