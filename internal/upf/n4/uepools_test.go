package n4

import (
	"net/netip"
	"testing"

	"github.com/xdp5g/xdp5g/internal/upf/ippool"
)

// A network instance with a pool of its own takes its sessions' UE
// addresses there, by its name whether the SMF writes it as an APN or
// plainly; the others take the default pool's, and a deleted session gives
// its address back to the pool it came from.
func TestUEPoolsByNetworkInstance(t *testing.T) {
	e := newEnv(t)
	ims, err := ippool.New(netip.MustParsePrefix("10.46.0.0/28"))
	if err != nil {
		t.Fatal(err)
	}
	e.h = New(Config{Store: e.store, N3: []netip.Addr{n3}, UEPool: e.pool,
		UEPools: map[string]*ippool.Pool{"ims.mnc001": ims}, Buffers: e.buffers})
	// withInstances is a session whose uplink and downlink PDRs name
	// network instances.
	withInstances := func(cpSEID uint64, uplink, downlink []byte) [][]byte {
		return [][]byte{nodeIDv4("127.0.0.4"), cpFSEID(cpSEID, "127.0.0.4"),
			createPDR(pdrID(1), precedence(255), pdi(sourceInterface(ifAccess), fteidChoose(5), uplink, ueChooseV4(false)),
				outerHeaderRemoval(0), farID(1)),
			createPDR(pdrID(2), precedence(255), pdi(sourceInterface(ifCore), downlink, ueChooseV4(true)), farID(2)),
			coreFAR(), accessFAR(0x0a0b0c0d, gnb)}
	}
	for _, c := range []struct {
		name     string
		instance []byte
		pool     *ippool.Pool
	}{
		{name: "as an APN", instance: networkInstance("ims.mnc001"), pool: ims},
		{name: "plainly", instance: tlv(tNetworkInstance, []byte("ims.mnc001")), pool: ims},
		{name: "another instance", instance: networkInstance("internet"), pool: e.pool},
		{name: "no instance", pool: e.pool},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.establish("smf1", withInstances(0x2001, c.instance, c.instance)...)
			seid := r.upSEID(t)
			ue := one(t, r.created(t)[1], tUEIPAddress)
			if a := netip.AddrFrom4([4]byte(ue[1:])); !c.pool.Prefix().Contains(a) || c.pool.Allocated() != 1 {
				t.Errorf("UE address %v, %d allocated from %v", a, c.pool.Allocated(), c.pool.Prefix())
			}
			e.delete("smf1", seid).expect(t, causeAccepted, nil, nil)
			if ims.Allocated()+e.pool.Allocated() != 0 {
				t.Errorf("after the deletion %d and %d addresses are still allocated", ims.Allocated(), e.pool.Allocated())
			}
		})
	}

	// One session has one UE address: a PDR of another instance's pool
	// cannot share it, and the refusal gives back what the request took.
	before := e.state()
	imsBefore := ims.Allocated()
	mixed := withInstances(0x2002, networkInstance("ims.mnc001"), networkInstance("internet"))
	e.establish("smf1", mixed...).expect(t, causeRuleFailure, failedPDR(2), nil)
	if ims.Allocated() != imsBefore {
		t.Errorf("the refused request kept %d addresses of the ims pool", ims.Allocated()-imsBefore)
	}
	e.unchanged(before)
}
