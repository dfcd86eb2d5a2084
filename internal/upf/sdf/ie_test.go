package sdf

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseIE(t *testing.T) {
	desc := "permit out 17 from any to assigned 53"
	ie := []byte{flagFD | flagTTC | flagSPI | flagFL | flagBID, 0, 0, byte(len(desc))}
	ie = append(ie, desc...)
	ie = append(ie,
		0xb8, 0xfc, // ToS / traffic class, mask
		0, 0, 1, 0, // SPI
		0xf1, 0x23, 0x45, // flow label, spare bits set
		0, 0, 0, 9, // SDF filter ID
		0xee, // an octet of some later release
	)
	got, err := ParseIE(ie)
	if err != nil {
		t.Fatal(err)
	}
	want := Filter{
		Proto:         17,
		Dst:           Endpoint{Assigned: true, Ports: []PortRange{{Lo: 53, Hi: 53}}},
		TOS:           TOS{Value: 0xb8, Mask: 0xfc},
		SPI:           256,
		FlowLabel:     0x12345,
		HasFlowLabel:  true,
		ID:            9,
		Bidirectional: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseIE = %+v, want %+v", got, want)
	}

	// Every field may come alone.
	if got, err := ParseIE([]byte{flagSPI, 0, 0, 0, 0, 5}); err != nil || !reflect.DeepEqual(got, Filter{SPI: 5}) {
		t.Errorf("SPI alone: %+v, %v", got, err)
	}
	if got, err := ParseIE([]byte{flagBID, 0, 0, 0, 0, 0}); err != nil || !reflect.DeepEqual(got, Filter{Bidirectional: true}) {
		t.Errorf("ID alone: %+v, %v", got, err)
	}
}

func TestParseIEErrors(t *testing.T) {
	tests := []struct {
		ie   []byte
		want string
	}{
		{ie: nil, want: "SDF filter IE: flags needs 2 octets, 0 left"},
		{ie: []byte{flagFD, 0, 0}, want: "flow description length needs 2 octets, 1 left"},
		{ie: []byte{flagFD, 0, 0, 9, 'p'}, want: "flow description needs 9 octets, 1 left"},
		{ie: []byte{flagTTC, 0, 1}, want: "ToS traffic class needs 2 octets, 1 left"},
		{ie: []byte{flagTTC | flagSPI, 0, 1, 2, 3}, want: "security parameter index needs 4 octets, 1 left"},
		{ie: []byte{flagFL, 0, 1, 2}, want: "flow label needs 3 octets, 2 left"},
		{ie: []byte{flagBID, 0}, want: "SDF filter ID needs 4 octets, 0 left"},
	}
	for _, tt := range tests {
		if _, err := ParseIE(tt.ie); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseIE(%x) error = %v, want %q", tt.ie, err, tt.want)
		}
	}
	desc := "permit in ip from any to assigned"
	_, err := ParseIE(append([]byte{flagFD, 0, 0, byte(len(desc))}, desc...))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Token != "in" {
		t.Errorf("bad flow description: error = %v, want a *SyntaxError for \"in\"", err)
	}
}

func FuzzParseIE(f *testing.F) {
	f.Add([]byte{flagFD | flagFL, 0, 0, 5, 'p', 'e', 'r', 'm', 'i', 1, 2, 3})
	f.Add([]byte{0x1f, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	f.Fuzz(func(t *testing.T, ie []byte) {
		ParseIE(ie) // must not panic
	})
}
