package cuup

import (
	"cmp"
	"slices"

	"github.com/xdp5g/xdp5g/internal/ran/e1"
)

// Context is a bearer context as the API shows it: what the CU-CP set up
// (without its keys), the tunnels, and what each DRB carried.
type Context struct {
	CUCPUEID    uint32               `json:"gnbCuCpUeE1apId"`
	CUUPUEID    uint32               `json:"gnbCuUpUeE1apId"`
	Algorithm   e1.SecurityAlgorithm `json:"securityAlgorithm"`
	PDUSessions []Session            `json:"pduSessions"`
}

// Session is a PDU session of a Context.
type Session struct {
	ID             uint8             `json:"pduSessionId"`
	SecurityResult e1.SecurityResult `json:"securityResult"`
	// DLTunnel is the CU-UP's endpoint, where the UPF sends the downlink;
	// ULTunnel the UPF's, where the uplink goes.
	DLTunnel e1.UPTunnel `json:"ngDlUpTnlInformation"`
	ULTunnel e1.UPTunnel `json:"ngUlUpTnlInformation"`
	DRBs     []DRB       `json:"drbs"`
}

// DRB is a DRB of a Session.
type DRB struct {
	ID       uint8                `json:"drbId"`
	ULTunnel e1.UPTunnel          `json:"ulUpTransportParameters"`
	DLTunnel *e1.UPTunnel         `json:"dlUpParameters,omitempty"` // the DU's; absent until given
	SDAP     e1.SDAPConfiguration `json:"sdapConfiguration"`
	PDCP     e1.PDCPConfiguration `json:"pdcpConfiguration"`
	Flows    e1.IDs               `json:"qosFlows"`
	// Placement is where its PDCP security runs.
	Placement Placement `json:"placement"`
	Stats     DRBStats  `json:"stats"`
}

// List shows every bearer context, by CU-UP ID.
func (c *CUUP) List() []Context {
	c.mu.RLock()
	defer c.mu.RUnlock()
	list := []Context{}
	for _, bc := range c.contexts {
		list = append(list, c.view(bc))
	}
	slices.SortFunc(list, func(a, b Context) int { return cmp.Compare(a.CUUPUEID, b.CUUPUEID) })
	return list
}

// Get shows one bearer context.
func (c *CUUP) Get(id uint32) (Context, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	bc := c.contexts[id]
	if bc == nil {
		return Context{}, &NotFoundError{id}
	}
	return c.view(bc), nil
}

func (c *CUUP) view(bc *bearerContext) Context {
	v := Context{CUCPUEID: bc.cucpID, CUUPUEID: bc.cuupID, Algorithm: bc.security.Algorithm, PDUSessions: []Session{}}
	for _, ps := range bc.sessions {
		setup := c.setupList([]*pduSession{ps})[0]
		s := Session{ID: setup.ID, SecurityResult: setup.SecurityResult, DLTunnel: setup.DLTunnel, ULTunnel: ps.ulTunnel, DRBs: []DRB{}}
		for _, d := range ps.drbs {
			s.DRBs = append(s.DRBs, DRB{ID: d.cfg.ID, ULTunnel: e1.UPTunnel{Address: c.cfg.F1U, TEID: d.ulTEID},
				DLTunnel: d.dlTunnel, SDAP: d.cfg.SDAP, PDCP: d.cfg.PDCP, Flows: d.flows(),
				Placement: Placement(d.placement.Load()), Stats: d.state.read()})
		}
		slices.SortFunc(s.DRBs, func(a, b DRB) int { return cmp.Compare(a.ID, b.ID) })
		v.PDUSessions = append(v.PDUSessions, s)
	}
	slices.SortFunc(v.PDUSessions, func(a, b Session) int { return cmp.Compare(a.ID, b.ID) })
	return v
}
