package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/xdp5g/xdp5g/internal/platform/xdplink"
	"github.com/xdp5g/xdp5g/internal/ran/cellsite"
	"github.com/xdp5g/xdp5g/internal/ran/cuup"
	"github.com/xdp5g/xdp5g/internal/ran/cuupxdp"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
	"github.com/xdp5g/xdp5g/internal/ran/nrsec"
	"github.com/xdp5g/xdp5g/internal/ran/nru"
	"github.com/xdp5g/xdp5g/internal/upf/gtpu"
)

// The CU-UP demo's traffic: downlink packets from the UPF, uplink PDUs
// from the DU, and the tunnels the UE's bearer context does not name.
const (
	cuupDownlink = 2000
	cuupUplink   = 500
	cuupQFI      = 9
	cuupDUTEID   = 0xd1
	cuupUPFTEID  = 0x5501
)

var (
	cuupEncKey = []byte("xdp5g demo KUPen")
	cuupIntKey = []byte("xdp5g demo KUPin")
)

// runCUUP sends a UE's traffic through the CU-UP's AF_XDP path, NEA2 and
// NIA2, between a UPF and a DU that check what they receive with their own
// PDCP security.
func runCUUP(ctx context.Context, w io.Writer) (err error) {
	site, err := cellsite.New("demo-cu")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, site.Close()) }()
	dp, err := cuupxdp.Open(cuupxdp.Config{})
	if err != nil {
		return err
	}
	defer dp.Close()
	c, err := cuup.New(cuup.Config{N3: cellsite.CUN3Addr, F1U: cellsite.CUF1UAddr, Tunnels: dp})
	if err != nil {
		return err
	}
	defer c.Close()
	var x *cuup.XDP
	if err := site.CU.Do(func() (err error) {
		x, err = c.OpenXDP(dp, cuup.XDPConfig{N3: cellsite.N3, F1U: cellsite.F1U, Mode: xdplink.ModeNative})
		return err
	}); err != nil {
		return err
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- x.Serve(serveCtx) }()
	defer func() {
		stop()
		err = errors.Join(err, <-served, x.Close())
	}()

	fmt.Fprintln(w, "\nxdp5g demo: UPF ──N3── CU-UP ──F1-U── DU, each in a network namespace of its own")
	fmt.Fprintf(w, "  UPF    %-16s %s %s\n", site.UPF.Name, cellsite.N3, cellsite.UPFAddr)
	fmt.Fprintf(w, "  CU-UP  %-16s %s %s, %s %s: xdp_cuup in native mode, an AF_XDP socket on each\n", site.CU.Name,
		cellsite.N3, cellsite.CUN3Addr, cellsite.F1U, cellsite.CUF1UAddr)
	fmt.Fprintf(w, "  DU     %-16s %s %s\n", site.DU.Name, cellsite.F1U, cellsite.DUAddr)
	n3TEID, f1uTEID, err := cuupBearer(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  bearer context: NEA2 and NIA2; PDU session 1 on N3 TEID %#x, DRB 1 (QFI %d, 18-bit SNs) on F1-U TEID %#x, to the DU's %#x\n\n",
		n3TEID, cuupQFI, f1uTEID, cuupDUTEID)

	upf, err := cellsite.ListenGTPU(site.UPF, cellsite.UPFAddr)
	if err != nil {
		return err
	}
	defer upf.Close()
	du, err := cellsite.ListenGTPU(site.DU, cellsite.DUAddr)
	if err != nil {
		return err
	}
	defer du.Close()
	sec, err := newPDCPSecurity()
	if err != nil {
		return err
	}
	inner := UEPacket(UEAddr, DNAddr, false, UETTL)
	down, err := cuupDownlinkRun(upf, du, sec, n3TEID, inner)
	if err != nil {
		return cmp.Or(ctx.Err(), err) // interrupted, the CU-UP's workers stopped
	}
	fmt.Fprintf(w, "downlink  %5d sent by the UPF, %5d PDCP PDUs at the DU: %d with a good MAC-I, deciphered to the UE's packet, COUNT and NR-U SN in sequence\n",
		cuupDownlink, down.received, down.verified)
	up, err := cuupUplinkRun(upf, du, sec, f1uTEID, UEPacket(UEAddr, DNAddr, true, UETTL))
	if err != nil {
		return cmp.Or(ctx.Err(), err)
	}
	fmt.Fprintf(w, "uplink    %5d sent by the DU,  %5d G-PDUs at the UPF with the UL PDU Session Container of QFI %d\n",
		cuupUplink, up, cuupQFI)
	return printCUUPCounters(w, c, dp, down, up)
}

// cuupBearer sets up the demo UE and gives its DRB the DU's tunnel; it
// returns the CU-UP's N3 and F1-U TEIDs.
func cuupBearer(c *cuup.CUUP) (n3, f1u uint32, err error) {
	nia2 := e1.Integrity(nrsec.AES)
	resp, err := c.Setup(e1.BearerContextSetupRequest{CUCPUEID: 1,
		Security: e1.SecurityInformation{Algorithm: e1.SecurityAlgorithm{Ciphering: e1.Ciphering(nrsec.AES), Integrity: &nia2},
			Key: e1.UPSecurityKey{Encryption: cuupEncKey, Integrity: (*e1.Key)(&cuupIntKey)}},
		PDUSessions: []e1.PDUSessionToSetup{{ID: 1, Type: e1.IPv4, SNSSAI: e1.SNSSAI{SST: 1},
			SecurityIndication: e1.SecurityIndication{Integrity: e1.Required, Confidentiality: e1.Required},
			ULTunnel:           e1.UPTunnel{Address: cellsite.UPFAddr, TEID: cuupUPFTEID},
			DRBs: []e1.DRBToSetup{{ID: 1, SDAP: e1.SDAPConfiguration{DefaultDRB: true, HeaderUL: true, HeaderDL: true},
				PDCP:     e1.PDCPConfiguration{SNSizeUL: 18, SNSizeDL: 18, RLCMode: e1.RLCAM},
				QoSFlows: []e1.QoSFlow{{QFI: cuupQFI, FiveQI: 9}}}}}}})
	if err != nil {
		return 0, 0, err
	}
	_, err = c.Modify(resp.CUUPUEID, e1.BearerContextModificationRequest{Modify: []e1.PDUSessionToModify{{ID: 1,
		ModifyDRBs: []e1.DRBToModify{{ID: 1, DLTunnel: &e1.UPTunnel{Address: cellsite.DUAddr, TEID: cuupDUTEID}}}}}})
	s := resp.PDUSessions[0]
	return s.DLTunnel.TEID, s.DRBs[0].ULTunnel.TEID, err
}

// pdcpSecurity is the UE's side of the DRB's security: what the DU stand-in
// deciphers and protects with.
type pdcpSecurity struct {
	cipher    nrsec.Cipher
	integrity nrsec.Integrity
}

func newPDCPSecurity() (s pdcpSecurity, err error) {
	if s.cipher, err = nrsec.NewCipher(nrsec.AES, cuupEncKey); err != nil {
		return s, err
	}
	s.integrity, err = nrsec.NewIntegrity(nrsec.AES, cuupIntKey)
	return s, err
}

type downlinkResult struct {
	received, verified int
}

// cuupDownlinkRun has the UPF send the UE's packet cuupDownlink times and
// the DU check each PDU: NR-U SN and COUNT in sequence, MAC-I, payload.
func cuupDownlinkRun(upf, du *net.UDPConn, sec pdcpSecurity, teid uint32, inner []byte) (downlinkResult, error) {
	var r downlinkResult
	container := gtpu.PDUSessionContent(gtpu.PDUSessionDL, cuupQFI)
	msg := make([]byte, gtpu.GPDUHeaderLen(len(container))+len(inner))
	n := gtpu.PutGPDUHeader(msg, teid, len(inner), gtpu.ExtPDUSessionContainer, container[:])
	copy(msg[n:], inner)
	to := netip.AddrPortFrom(cellsite.CUN3Addr, gtpu.Port)
	buf := make([]byte, 4096)
	for i := range cuupDownlink {
		if _, err := upf.WriteToUDPAddrPort(msg, to); err != nil {
			return r, err
		}
		// One at a time: the DU's socket buffer is the demo's bottleneck,
		// not the CU-UP.
		du.SetReadDeadline(time.Now().Add(time.Second))
		got, _, err := du.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		r.received++
		if sec.downlinkPDU(buf[:got], uint32(i), inner) {
			r.verified++
		}
	}
	if r.verified != cuupDownlink {
		return r, fmt.Errorf("the DU verified %d of %d downlink PDUs", r.verified, cuupDownlink)
	}
	return r, nil
}

// downlinkPDU checks an F1-U G-PDU: NR-U SN and COUNT sn, then MAC-I and
// payload after deciphering (the SDAP header stays in clear).
func (s pdcpSecurity) downlinkPDU(msg []byte, sn uint32, inner []byte) bool {
	h, err := gtpu.ParseHeader(msg)
	var frame nru.DLUserData
	if err != nil || h.TEID != cuupDUTEID || frame.Decode(h.NRRAN) != nil || frame.SN != sn {
		return false
	}
	pdu := msg[h.Len:h.End]
	if len(pdu) != 3+1+len(inner)+4 || uint32(pdu[0]&3)<<16|uint32(pdu[1])<<8|uint32(pdu[2]) != sn {
		return false
	}
	const bearer, downlink = 0, 1
	s.cipher.XORKeyStream(sn, bearer, downlink, pdu[4:], pdu[4:])
	mac := s.integrity.MAC(sn, bearer, downlink, pdu[:len(pdu)-4])
	return string(mac[:]) == string(pdu[len(pdu)-4:]) && pdu[3] == cuupQFI && string(pdu[4:len(pdu)-4]) == string(inner)
}

// cuupUplinkRun has the DU send the UE's packet cuupUplink times in PDCP
// PDUs it protects, and counts what reaches the UPF intact.
func cuupUplinkRun(upf, du *net.UDPConn, sec pdcpSecurity, teid uint32, inner []byte) (int, error) {
	to := netip.AddrPortFrom(cellsite.CUF1UAddr, gtpu.Port)
	buf := make([]byte, 4096)
	received := 0
	for count := range uint32(cuupUplink) {
		const bearer, uplink = 0, 0
		pdu := append([]byte{0x80 | byte(count>>16)&3, byte(count >> 8), byte(count), 0x80 | cuupQFI}, inner...)
		mac := sec.integrity.MAC(count, bearer, uplink, pdu)
		pdu = append(pdu, mac[:]...)
		sec.cipher.XORKeyStream(count, bearer, uplink, pdu[4:], pdu[4:])
		msg := make([]byte, gtpu.GPDUHeaderLen(0)+len(pdu))
		copy(msg[gtpu.PutGPDUHeader(msg, teid, len(pdu), 0, nil):], pdu)
		if _, err := du.WriteToUDPAddrPort(msg, to); err != nil {
			return received, err
		}
		upf.SetReadDeadline(time.Now().Add(time.Second))
		n, _, err := upf.ReadFromUDPAddrPort(buf)
		if err != nil {
			break
		}
		h, err := gtpu.ParseHeader(buf[:n])
		pduType, qfi, _, ok := gtpu.PDUSession(h.PDUSession)
		if err == nil && h.TEID == cuupUPFTEID && ok && pduType == gtpu.PDUSessionUL && qfi == cuupQFI &&
			string(buf[h.Len:h.End]) == string(inner) {
			received++
		}
	}
	if received != cuupUplink {
		return received, fmt.Errorf("the UPF received %d of %d uplink packets intact", received, cuupUplink)
	}
	return received, nil
}

// printCUUPCounters prints what the classifier and the workers counted.
func printCUUPCounters(w io.Writer, c *cuup.CUUP, dp *cuupxdp.Datapath, down downlinkResult, up int) error {
	fmt.Fprintln(w, "\nCU-UP classifier counters (xdp_cuup):")
	for _, role := range []cuupxdp.Role{cuupxdp.N3, cuupxdp.F1U} {
		st, err := dp.Stats(role)
		if err != nil {
			return err
		}
		for r, n := range st.Total {
			if n.Packets > 0 {
				fmt.Fprintf(w, "  %-4s %-20s %11s packets %13s bytes\n", role, cuupxdp.Reason(r), grouped(n.Packets), grouped(n.Bytes))
			}
		}
	}
	st := c.Stats()
	fmt.Fprintf(w, "CU-UP workers: %s downlink G-PDUs in, %s sent to the DU; %s uplink in, %s sent to the UPF; %s through the kernel until the peers' MAC addresses were known\n",
		grouped(st.Downlink), grouped(st.DownlinkSent), grouped(st.Uplink), grouped(st.UplinkSent), grouped(st.XDP.ThroughKernel))
	return nil
}
