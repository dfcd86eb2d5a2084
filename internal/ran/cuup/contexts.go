// Package cuup is the CU-UP's user plane: the bearer contexts a CU-CP sets
// up over E1 (package e1), and the downlink (N3 to F1-U) and uplink (F1-U
// to N3) paths through SDAP and PDCP that carry their packets.
package cuup

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/ran/cuupxdp"
	"github.com/xdp5g/xdp5g/internal/ran/e1"
	"github.com/xdp5g/xdp5g/internal/ran/sdap"
)

// maxBearers keeps a bearer's index in the 24 bits below a TEID's
// generation.
const maxBearers = 1 << 24

// Role is the interface a tunnel's packets come in on: N3 from the UPF
// (downlink, a tunnel per PDU session), F1-U from the DU (uplink, a tunnel
// per DRB).
type Role = cuupxdp.Role

// The CU-UP's interfaces.
const (
	N3  = cuupxdp.N3
	F1U = cuupxdp.F1U
)

// Tunnels is where the CU-UP's own tunnel endpoints are programmed: the
// XDP classifier's map on the AF_XDP path; nil on the socket path.
type Tunnels interface {
	AddTunnel(teid uint32, role Role, bearer uint32) error
	DeleteTunnel(teid uint32, role Role) error
}

// Config sets up a CU-UP.
type Config struct {
	// N3 and F1U are the CU-UP's addresses on each interface: the
	// endpoints of the tunnels it hands out.
	N3, F1U netip.Addr
	Tunnels Tunnels // nil: none to program
	// CryptoWorkers are the goroutines of the crypto pool that DRBs
	// placed on it use; none by default, and then every DRB is inline.
	CryptoWorkers int
	// Placement is where a new DRB's crypto runs (SetPlacement changes a
	// DRB's).
	Placement Placement
}

// CUUP holds the bearer contexts and the bearers the data path looks up.
type CUUP struct {
	cfg Config

	mu       sync.RWMutex // bearer contexts and the tables below
	contexts map[uint32]*bearerContext
	nextUEID uint32
	// bearers is indexed by what the classifier hands user space with
	// each packet: a PDU session's for N3, a DRB's for F1-U.
	bearers     []bearer
	free        []uint32 // unused indexes of bearers
	generation  uint8
	workers     []*Worker
	timers      timerSet    // has a lock of its own: workers schedule
	pool        *cryptoPool // nil without CryptoWorkers
	socketStats SocketStats
	xdpStats    XDPStats
}

// bearer is a PDU session's (downlink, N3) or DRB's (uplink, F1-U) entry of
// the data path's table; nil fields where the index is free.
type bearer struct {
	session *pduSession
	drb     *drb // set for F1-U
}

type bearerContext struct {
	cucpID, cuupID uint32
	security       e1.SecurityInformation
	keys           keys
	sessions       map[uint8]*pduSession
}

type pduSession struct {
	cfg                  e1.PDUSessionToSetup
	ulTunnel             e1.UPTunnel // the UPF's
	dlTEID               uint32      // the CU-UP's, on N3
	index                uint32      // in bearers
	integrity, ciphering bool
	drbs                 map[uint8]*drb
	// byID and sdap are the data path's view of drbs, rebuilt when they
	// change.
	byID [sdap.MaxDRB + 1]*drb
	sdap *sdap.Session
}

type drb struct {
	cfg      e1.DRBToSetup
	session  *pduSession
	ulTEID   uint32       // the CU-UP's, on F1-U
	dlTunnel *e1.UPTunnel // the DU's; nil until a modification gives it
	index    uint32
	state    *drbState
	// placement is a Placement, read by workers as they number PDUs.
	placement atomic.Uint32
}

// New returns a CU-UP with no bearer contexts.
func New(cfg Config) (*CUUP, error) {
	if !cfg.N3.IsValid() || !cfg.F1U.IsValid() {
		return nil, errors.New("cuup: the N3 and F1-U addresses are required")
	}
	if cfg.CryptoWorkers < 0 || cfg.Placement == Pool && cfg.CryptoWorkers == 0 {
		return nil, fmt.Errorf("cuup: %d crypto workers, %v placement by default: the pool needs workers", cfg.CryptoWorkers, cfg.Placement)
	}
	c := &CUUP{cfg: cfg, contexts: map[uint32]*bearerContext{}, nextUEID: 1}
	if cfg.CryptoWorkers > 0 {
		c.pool = newCryptoPool(cfg.CryptoWorkers)
	}
	return c, nil
}

// Close stops the crypto pool; call it once no worker runs.
func (c *CUUP) Close() { c.pool.close() }

// SetPlacement moves where a DRB's PDCP security runs.
func (c *CUUP) SetPlacement(id uint32, drbID uint8, p Placement) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	bc := c.contexts[id]
	if bc == nil {
		return &NotFoundError{id}
	}
	for _, ps := range bc.sessions {
		if d := ps.drbs[drbID]; d != nil {
			if p == Pool && c.pool == nil {
				return &ConflictError{"the CU-UP has no crypto pool"}
			}
			d.placement.Store(uint32(p))
			return nil
		}
	}
	return &ConflictError{fmt.Sprintf("bearer context %d has no DRB %d", id, drbID)}
}

// ConflictError is a request about a bearer context that does not exist,
// or a change it cannot take.
type ConflictError struct{ Msg string }

func (e *ConflictError) Error() string { return e.Msg }

// NotFoundError is a request for a bearer context the CU-UP does not have.
type NotFoundError struct{ ID uint32 }

func (e *NotFoundError) Error() string { return fmt.Sprintf("no bearer context %d", e.ID) }

// Setup sets up a bearer context (TS 38.463 §8.3.1): it hands out the
// N3 downlink tunnel of each PDU session and the F1-U uplink tunnel of each
// DRB. A refused request changes nothing.
func (c *CUUP) Setup(req e1.BearerContextSetupRequest) (e1.BearerContextSetupResponse, error) {
	if err := req.Validate(); err != nil {
		return e1.BearerContextSetupResponse{}, err
	}
	for i, s := range req.PDUSessions {
		if err := c.checkFamily(N3, s.ULTunnel, fmt.Sprintf("pduSessionResourceToSetupList[%d].ngUlUpTnlInformation", i)); err != nil {
			return e1.BearerContextSetupResponse{}, err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.nextUEID
	for c.contexts[id] != nil || id == 0 {
		id++
	}
	k, err := newKeys(req.Security)
	if err != nil {
		return e1.BearerContextSetupResponse{}, err
	}
	bc := &bearerContext{cucpID: req.CUCPUEID, cuupID: id, security: req.Security, keys: k, sessions: map[uint8]*pduSession{}}
	var added []*pduSession
	for _, s := range req.PDUSessions {
		ps, err := c.addSession(bc, s)
		if err != nil {
			for _, ps := range added {
				c.dropSession(bc, ps)
			}
			return e1.BearerContextSetupResponse{}, err
		}
		added = append(added, ps)
	}
	c.contexts[id] = bc
	c.nextUEID = id + 1
	return e1.BearerContextSetupResponse{CUCPUEID: bc.cucpID, CUUPUEID: id, PDUSessions: c.setupList(added)}, nil
}

// Modify changes a bearer context (TS 38.463 §8.3.2): new security, PDU
// sessions added, changed (a new UPF endpoint; DRBs added, removed or
// given the DU's downlink tunnel) or removed. A refused request changes
// nothing.
func (c *CUUP) Modify(id uint32, req e1.BearerContextModificationRequest) (e1.BearerContextModificationResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bc := c.contexts[id]
	if bc == nil {
		return e1.BearerContextModificationResponse{}, &NotFoundError{id}
	}
	if err := c.checkModification(bc, req); err != nil {
		return e1.BearerContextModificationResponse{}, err
	}
	// Checked: from here only the tunnel map can fail, and that is undone.
	var added []*pduSession
	var addedDRBs []*drb
	undo := func() {
		for _, d := range addedDRBs {
			c.dropDRB(d.session, d)
		}
		for _, ps := range added {
			c.dropSession(bc, ps)
		}
	}
	for _, s := range req.Setup {
		ps, err := c.addSession(bc, s)
		if err != nil {
			undo()
			return e1.BearerContextModificationResponse{}, err
		}
		added = append(added, ps)
	}
	var modified []*pduSession
	type view struct {
		byID [sdap.MaxDRB + 1]*drb
		sdap *sdap.Session
	}
	views := map[uint8]view{}
	for _, m := range req.Modify {
		ps := bc.sessions[m.ID]
		drbs, err := c.addDRBs(bc, ps, m.SetupDRBs)
		if err == nil {
			addedDRBs = append(addedDRBs, drbs...)
			after := maps.Clone(ps.drbs)
			for _, d := range m.RemoveDRBs {
				delete(after, d)
			}
			var v view
			v.byID, v.sdap, err = mapDRBs(after)
			views[m.ID] = v
		}
		if err != nil {
			undo()
			return e1.BearerContextModificationResponse{}, err
		}
		modified = append(modified, ps)
	}
	// Nothing fails below.
	for _, m := range req.Modify {
		ps := bc.sessions[m.ID]
		if m.ULTunnel != nil {
			ps.ulTunnel = *m.ULTunnel
		}
		for _, d := range m.ModifyDRBs {
			if d.DLTunnel != nil {
				ps.drbs[d.ID].dlTunnel = d.DLTunnel
			}
		}
		for _, d := range m.RemoveDRBs {
			c.dropDRB(ps, ps.drbs[d])
		}
		ps.byID, ps.sdap = views[m.ID].byID, views[m.ID].sdap
	}
	for _, s := range req.Remove {
		c.dropSession(bc, bc.sessions[s])
	}
	return e1.BearerContextModificationResponse{CUCPUEID: bc.cucpID, CUUPUEID: id,
		Setup: c.setupList(added), Modified: c.setupList(modified)}, nil
}

// checkFamily refuses a peer's tunnel whose address is not of the family of
// the CU-UP's own address on that interface: packets to it could not leave.
func (c *CUUP) checkFamily(role Role, t e1.UPTunnel, field string) error {
	own, name := c.cfg.N3, "N3"
	if role == F1U {
		own, name = c.cfg.F1U, "F1-U"
	}
	if t.Address.IsValid() && t.Address.Is4() != own.Is4() {
		return fielderr.New(field, "transportLayerAddress %v is not of the family of the CU-UP's %s address %v", t.Address, name, own)
	}
	return nil
}

// checkModification refuses a modification that names what the context
// lacks or would break it.
func (c *CUUP) checkModification(bc *bearerContext, req e1.BearerContextModificationRequest) error {
	if req.Security != nil {
		return fielderr.New("securityInformation",
			"new keys need a PDCP re-establishment, which this CU-UP does not do: release the bearer context and set it up again")
	}
	ueDRBs := bc.drbIDs()
	if err := e1.ValidateSessions("pduSessionResourceToSetupList", req.Setup, bc.security, ueDRBs); err != nil {
		return err
	}
	for i, s := range req.Setup {
		if bc.sessions[s.ID] != nil {
			return fielderr.New(fmt.Sprintf("pduSessionResourceToSetupList[%d].pduSessionId", i), "PDU session %d exists", s.ID)
		}
		if err := c.checkFamily(N3, s.ULTunnel, fmt.Sprintf("pduSessionResourceToSetupList[%d].ngUlUpTnlInformation", i)); err != nil {
			return err
		}
		for _, d := range s.DRBs {
			ueDRBs = append(ueDRBs, d.ID)
		}
	}
	for i, m := range req.Modify {
		p := fmt.Sprintf("pduSessionResourceToModifyList[%d]", i)
		ps := bc.sessions[m.ID]
		if ps == nil {
			return fielderr.New(p+".pduSessionId", "no PDU session %d", m.ID)
		}
		if m.ULTunnel != nil {
			if err := m.ULTunnel.Validate(); err != nil {
				return fielderr.New(p+".ngUlUpTnlInformation", "%v", err)
			}
			if err := c.checkFamily(N3, *m.ULTunnel, p+".ngUlUpTnlInformation"); err != nil {
				return err
			}
		}
		var flows []uint8
		for id, d := range ps.drbs {
			if !slices.Contains(m.RemoveDRBs, id) {
				flows = append(flows, d.flows()...)
			}
		}
		var err error
		if ueDRBs, err = e1.ValidateDRBs(p+".drbToSetupList", m.SetupDRBs, ueDRBs, flows); err != nil {
			return err
		}
		for j, d := range m.ModifyDRBs {
			dp := fmt.Sprintf("%s.drbToModifyList[%d]", p, j)
			if ps.drbs[d.ID] == nil {
				return fielderr.New(dp+".drbId", "PDU session %d has no DRB %d", m.ID, d.ID)
			}
			if d.DLTunnel != nil {
				if err := d.DLTunnel.Validate(); err != nil {
					return fielderr.New(dp+".dlUpParameters", "%v", err)
				}
				if err := c.checkFamily(F1U, *d.DLTunnel, dp+".dlUpParameters"); err != nil {
					return err
				}
			}
		}
		for j, d := range m.RemoveDRBs {
			if ps.drbs[d] == nil {
				return fielderr.New(fmt.Sprintf("%s.drbToRemoveList[%d]", p, j), "PDU session %d has no DRB %d", m.ID, d)
			}
		}
		after := maps.Clone(ps.drbs)
		for _, d := range m.RemoveDRBs {
			delete(after, d)
		}
		for _, d := range m.SetupDRBs {
			after[d.ID] = &drb{cfg: d}
		}
		if _, err := newSDAP(after); err != nil {
			return fielderr.New(p+".drbToSetupList", "%v", err)
		}
		if len(m.RemoveDRBs) == len(ps.drbs) && len(m.SetupDRBs) == 0 {
			return fielderr.New(p+".drbToRemoveList", "a PDU session keeps one DRB at least; remove the session instead")
		}
	}
	for i, s := range req.Remove {
		if bc.sessions[s] == nil {
			return fielderr.New(fmt.Sprintf("pduSessionResourceToRemoveList[%d]", i), "no PDU session %d", s)
		}
	}
	return nil
}

// Release releases a bearer context (TS 38.463 §8.3.4).
func (c *CUUP) Release(id uint32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	bc := c.contexts[id]
	if bc == nil {
		return &NotFoundError{id}
	}
	for _, ps := range bc.sessions {
		c.dropSession(bc, ps)
	}
	delete(c.contexts, id)
	return nil
}

// addSession gives a PDU session its N3 tunnel and its DRBs theirs.
func (c *CUUP) addSession(bc *bearerContext, s e1.PDUSessionToSetup) (*pduSession, error) {
	integrity, _ := e1.IntegrityPerformed(s.SecurityIndication, bc.security)
	ps := &pduSession{cfg: s, ulTunnel: s.ULTunnel, integrity: integrity,
		ciphering: s.SecurityIndication.Confidentiality != e1.NotNeeded, drbs: map[uint8]*drb{}}
	var err error
	if ps.index, ps.dlTEID, err = c.addBearer(N3, bearer{session: ps}); err != nil {
		return nil, err
	}
	if _, err := c.addDRBs(bc, ps, s.DRBs); err != nil {
		c.dropBearer(N3, ps.index, ps.dlTEID)
		return nil, err
	}
	if ps.byID, ps.sdap, err = mapDRBs(ps.drbs); err != nil {
		c.dropSession(bc, ps)
		return nil, fielderr.New("pduSessionResourceToSetupList", "%v", err)
	}
	bc.sessions[s.ID] = ps
	return ps, nil
}

// addDRBs adds DRBs to a session, all or none.
func (c *CUUP) addDRBs(bc *bearerContext, ps *pduSession, drbs []e1.DRBToSetup) ([]*drb, error) {
	var added []*drb
	for _, cfg := range drbs {
		d := &drb{cfg: cfg, session: ps}
		d.placement.Store(uint32(c.cfg.Placement))
		err := d.start(ps, bc.keys)
		if err == nil {
			d.index, d.ulTEID, err = c.addBearer(F1U, bearer{session: ps, drb: d})
		}
		if err != nil {
			for _, a := range added {
				c.dropDRB(ps, a)
			}
			return nil, err
		}
		ps.drbs[cfg.ID] = d
		added = append(added, d)
	}
	return added, nil
}

// addBearer takes an index of the bearer table and a tunnel endpoint for
// it.
func (c *CUUP) addBearer(role Role, b bearer) (index, teid uint32, err error) {
	if n := len(c.free); n > 0 {
		index, c.free = c.free[n-1], c.free[:n-1]
		c.bearers[index] = b
	} else {
		if len(c.bearers) == maxBearers {
			return 0, 0, &ConflictError{fmt.Sprintf("the CU-UP has %d bearers, its most", maxBearers)}
		}
		index = uint32(len(c.bearers))
		c.bearers = append(c.bearers, b)
	}
	// The index, and a generation so that a released TEID is not soon
	// handed out again: unique while the bearer lives.
	c.generation++
	teid = uint32(c.generation)<<24 | index
	if teid == 0 {
		teid = 1 << 24
	}
	if c.cfg.Tunnels != nil {
		if err := c.cfg.Tunnels.AddTunnel(teid, role, index); err != nil {
			c.bearers[index] = bearer{}
			c.free = append(c.free, index)
			return 0, 0, fmt.Errorf("programming the %v tunnel %#x: %w", role, teid, err)
		}
	}
	return index, teid, nil
}

func (c *CUUP) dropBearer(role Role, index, teid uint32) {
	if c.cfg.Tunnels != nil {
		c.cfg.Tunnels.DeleteTunnel(teid, role) // gone already if it fails: nothing to undo
	}
	c.bearers[index] = bearer{}
	c.free = append(c.free, index)
}

func (c *CUUP) dropDRB(ps *pduSession, d *drb) {
	c.dropBearer(F1U, d.index, d.ulTEID)
	delete(ps.drbs, d.cfg.ID)
}

func (c *CUUP) dropSession(bc *bearerContext, ps *pduSession) {
	for _, d := range ps.drbs {
		c.dropDRB(ps, d)
	}
	c.dropBearer(N3, ps.index, ps.dlTEID)
	delete(bc.sessions, ps.cfg.ID)
}

// mapDRBs builds the data path's view of a session's DRBs.
func mapDRBs(drbs map[uint8]*drb) (byID [sdap.MaxDRB + 1]*drb, s *sdap.Session, err error) {
	for id, d := range drbs {
		byID[id] = d
	}
	s, err = newSDAP(drbs)
	return byID, s, err
}

func (d *drb) flows() e1.IDs {
	var qfis e1.IDs
	for _, f := range d.cfg.QoSFlows {
		qfis = append(qfis, f.QFI)
	}
	return qfis
}

func (bc *bearerContext) drbIDs() []uint8 {
	var ids []uint8
	for _, ps := range bc.sessions {
		ids = slices.AppendSeq(ids, maps.Keys(ps.drbs))
	}
	return ids
}

// setupList answers for sessions set up or modified: their tunnels.
func (c *CUUP) setupList(sessions []*pduSession) []e1.PDUSessionSetup {
	var list []e1.PDUSessionSetup
	for _, ps := range sessions {
		s := e1.PDUSessionSetup{ID: ps.cfg.ID, DLTunnel: e1.UPTunnel{Address: c.cfg.N3, TEID: ps.dlTEID},
			SecurityResult: e1.SecurityResult{Integrity: result(ps.integrity), Confidentiality: result(ps.ciphering)},
			DRBs:           []e1.DRBSetup{}}
		for _, d := range ps.drbs {
			s.DRBs = append(s.DRBs, e1.DRBSetup{ID: d.cfg.ID, ULTunnel: e1.UPTunnel{Address: c.cfg.F1U, TEID: d.ulTEID}, Flows: d.flows()})
		}
		slices.SortFunc(s.DRBs, func(a, b e1.DRBSetup) int { return cmp.Compare(a.ID, b.ID) })
		list = append(list, s)
	}
	return list
}

func result(performed bool) e1.Result {
	if performed {
		return e1.Performed
	}
	return e1.NotPerformed
}
