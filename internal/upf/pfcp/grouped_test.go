package pfcp

import (
	"testing"

	"github.com/wmnsk/go-pfcp/ie"
)

// go-pfcp's grouped-IE check answers from the table as it did from its
// own map.
func TestGroupedTable(t *testing.T) {
	for typ, grouped := range map[uint16]bool{ie.CreatePDR: true, ie.PDI: true, ie.UpdateFAR: true, ie.CreatedPDR: true,
		ie.UsageReportWithinSessionReportRequest: true, ie.Cause: false, ie.PDRID: false, ie.FTEID: false, 0xffff: false} {
		if got := (&ie.IE{Type: typ}).IsGrouped(); got != grouped {
			t.Errorf("IE type %d grouped: %v, want %v", typ, got, grouped)
		}
	}
}
