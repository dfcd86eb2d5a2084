package bench

import (
	"errors"
	"io"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/lab/videonet"
)

// The use case of "Towards an FPGA-Accelerated Programmable Data Path for Edge-to-Core Communications in 5G Networks"
// (its Table 3): scalable H.265 video flows of each
// traffic type, one rule per flow dropping the enhancement layer, through
// namespaces.
var videoFlows = []int{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512} // 0: the flows of 1, no rules

const (
	videoPackets = 20000   // per layer and configuration
	videoRate    = 500_000 // packets per second
)

type videoRow struct {
	kind              videonet.Kind
	flows, rules      int
	base, enhancement videonet.Layer
	counted           uint64 // by the rules
}

// measureVideo sends each configuration's base layer, then its
// enhancement layer, at videoRate and counts what the sink got.
func measureVideo() (rows []videoRow, err error) {
	d, err := classifyxdp.OpenDatapath(classifyxdp.Config{})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	n, err := videonet.New(d.Program(), videonet.Stamps{})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, n.Close()) }()
	for _, kind := range videonet.Kinds {
		for _, flows := range videoFlows {
			progress("the edge-to-core video use case: %s, %d flows", kind, flows)
			row := videoRow{kind: kind, flows: max(flows, 1), rules: flows}
			rules := videonet.EnhancementLayerDrops(kind, flows)
			if err := d.Add(rules...); err != nil {
				return nil, err
			}
			if row.base, err = n.SendLayer(kind, 0, row.flows, videoPackets, videoRate); err != nil {
				return nil, err
			}
			if row.enhancement, err = n.SendLayer(kind, 1, row.flows, videoPackets, videoRate); err != nil {
				return nil, err
			}
			for _, r := range rules {
				packets, _, err := d.Counters(r.ID)
				if err != nil {
					return nil, err
				}
				row.counted += packets
			}
			if err := d.Clear(); err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func reportVideo(w io.Writer, rows []videoRow) {
	p := linesTo(w)
	p("\n### Scalable H.265 video, the enhancement layer dropped (the use case of %s)\n", edgeToCore)
	p("Through namespaces (sender → router with xdp_classify at its edge, kernel forwarding → sink): per configuration,")
	p("%d RTP packets of the base layer (H.265 layer id 0), then %d of the enhancement layer (layer id 1), at %d packets/s", videoPackets, videoPackets, videoRate)
	p("over the flows (UE source ports), with one rule per flow dropping its enhancement layer (none in the rows of 0 rules).")
	p("Saved: the share of the offered octets the rules kept off the core link.\n")
	p("| Traffic | Flows | Rules | Base sent | Base arrived | Enhancement sent | Enhancement arrived | Counted by the rules | Octets offered | Octets forwarded | Saved |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		offered := r.base.Sent*r.base.FrameLen + r.enhancement.Sent*r.enhancement.FrameLen
		forwarded := r.base.Arrived*r.base.FrameLen + r.enhancement.Arrived*r.enhancement.FrameLen
		p("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.1f%% |", r.kind, r.flows, r.rules, r.base.Sent, r.base.Arrived,
			r.enhancement.Sent, r.enhancement.Arrived, r.counted, offered, forwarded, 100*float64(offered-forwarded)/float64(offered))
	}
	lost, leaked := 0, 0
	for _, r := range rows {
		if r.base.Arrived != r.base.Sent {
			lost++
		}
		if r.rules > 0 && r.enhancement.Arrived != 0 {
			leaked++
		}
	}
	p("\n- every base-layer packet delivered: %s (%d configurations short)", verdict[lost == 0], lost)
	p("- every enhancement-layer packet dropped where rules are installed: %s (%d configurations leaked)", verdict[leaked == 0], leaked)
}
