package percpu

import (
	"structs"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// counter is laid out as bpf2go generates struct counter.
type counter struct {
	_       structs.HostLayout
	Packets uint64
	Bytes   uint64
}

func TestSum(t *testing.T) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 16, MaxEntries: 2})
	testsupport.CheckLoad(t, err)
	defer m.Close()
	perCPU := make([]counter, ebpf.MustPossibleCPU())
	var want counter
	for cpu := range perCPU {
		perCPU[cpu] = counter{Packets: uint64(cpu + 1), Bytes: 100 * uint64(cpu+1)}
		want.Packets += uint64(cpu + 1)
		want.Bytes += 100 * uint64(cpu+1)
	}
	if err := m.Put(uint32(1), perCPU); err != nil {
		t.Fatal(err)
	}
	if got, err := Sum[counter](m, uint32(1)); err != nil || got != want {
		t.Errorf("Sum = %+v (%v), want %+v", got, err, want)
	}
	if got, err := Sum[counter](m, uint32(0)); err != nil || got != (counter{}) {
		t.Errorf("Sum of an untouched key = %+v (%v), want zeros", got, err)
	}
	if _, err := Sum[counter](m, uint32(2)); err == nil {
		t.Error("Sum of a key beyond the map: no error")
	}
}

func TestTotal(t *testing.T) {
	if got := Total([]uint64{1, 2, 3}); got != 6 {
		t.Errorf("Total of integers = %d, want 6", got)
	}
	type nested struct {
		Count counter
		Hist  [2]uint32
		pad   uint64
	}
	got := Total([]nested{{counter{Packets: 1, Bytes: 2}, [2]uint32{3, 4}, 5}, {counter{Packets: 10, Bytes: 20}, [2]uint32{30, 40}, 50}})
	if want := (nested{Count: counter{Packets: 11, Bytes: 22}, Hist: [2]uint32{33, 44}}); got != want {
		t.Errorf("Total of structs = %+v, want %+v", got, want)
	}
}
