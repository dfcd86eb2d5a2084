package pfcp

import "github.com/wmnsk/go-pfcp/ie"

// UPFeature is one flag of the UP Function Features IE (TS 29.244 §8.2.25),
// numbered by its position: octet 5 bit 1 is 0, octet 5 bit 8 is 7, octet 6
// bit 1 is 8, and so on.
type UPFeature uint8

// The features of octets 5 to 10, in bit order; later ones go by number.
const (
	// Octet 5.
	FeatureBUCP UPFeature = iota // downlink data buffering in the CP function
	FeatureDDND                  // Downlink Data Notification Delay parameter
	FeatureDLBD                  // DL Buffering Duration parameter
	FeatureTRST                  // traffic steering
	FeatureFTUP                  // F-TEID allocation and release in the UP function
	FeaturePFDM                  // PFD Management procedure
	FeatureHEEU                  // header enrichment of uplink traffic
	FeatureTREU                  // traffic redirection enforcement
	// Octet 6.
	FeatureEMPU  // sending of End Marker packets
	FeaturePDIU  // PDI optimised signalling
	FeatureUDBC  // UL/DL buffering control
	FeatureQUOAC // Quota Action
	FeatureTRACE // trace
	FeatureFRRT  // framed routing
	FeaturePFDE  // PFD contents with multi-valued properties
	FeatureEPFAR // Enhanced PFCP Association Release
	// Octet 7.
	FeatureDPDRA // deferred PDR activation or deactivation
	FeatureADPDP // activation and deactivation of pre-defined PDRs
	FeatureUEIP  // UE IP address allocation
	FeatureSSET  // sessions successively controlled by SMFs of an SMF set
	FeatureMNOP  // measurement of number of packets
	FeatureMTE   // multiple Traffic Endpoint IDs in a PDI
	FeatureBUNDL // PFCP message bundling
	FeatureGCOM  // 5G VN group communication
	// Octet 8.
	FeatureMPAS  // multiple associations to the SMFs of an SMF set
	FeatureRTTL  // redundant transmission at the transport layer
	FeatureVTIME // quota validity time
	FeatureNORP  // Number of Reports
	FeatureIPTV  // IPTV service
	FeatureIP6PL // UE IPv6 prefixes other than /64
	FeatureTSCU  // time sensitive communication
	FeatureMPTCP // MPTCP proxy
	// Octet 9.
	FeatureATSSSLL // ATSSS-LL steering
	FeatureQFQM    // per QoS flow QoS monitoring
	FeatureGPQM    // per GTP-U path QoS monitoring
	FeatureMTEDT   // reporting the size of DL data packets
	FeatureCIOT    // CIoT, e.g. small data rate enforcement
	FeatureETHAR   // Ethernet PDU session anchor relocation
	FeatureDDDS    // reporting the first buffered or dropped downlink data
	FeatureRDS     // reliable data service
	// Octet 10.
	FeatureRTTWP // RTT measurements towards the UE without PMF
	FeatureQUASF // exempted applications and SDF filters for Quota Action
	FeatureNSPOC // notifying start of pause of charging
	FeatureL2TP  // L2TP
	FeatureUPBER // uplink packet buffering during EAS relocation
	FeatureRESPS // restoration of sessions by FQ-CSID, group or CP address
	FeatureIPREP // IP address and port replacement
	FeatureDNSTS // DNS traffic steering by FQDN
)

// upFeaturesIE encodes exactly the features given, or returns nil for none:
// the IE is only present when the UP function supports a feature (TS 29.244
// Table 7.4.4.1-1).
func upFeaturesIE(features []UPFeature) *ie.IE {
	if len(features) == 0 {
		return nil
	}
	octets := make([]byte, 2) // octets 5 and 6 are always present
	for _, f := range features {
		i := int(f / 8)
		for len(octets) <= i {
			octets = append(octets, 0)
		}
		octets[i] |= 1 << (f % 8)
	}
	return ie.New(ie.UPFunctionFeatures, octets)
}
