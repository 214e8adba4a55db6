// Package rtc sends a desktop's H.264 screen to a browser over WebRTC
// (pion), for links where TCP is the bottleneck: the same access units
// the screen hub (rfb) encodes once for every viewer, on a video track.
//
// It knows peers, ports and bytes, never users or pages: the console's
// websocket, already authorized for one desktop, carries the offer and
// the answer, and input, clipboard and cursor stay on that websocket's
// RFB stream. The portal is ICE-lite on ports it owns (one UDP port for
// every peer, an optional ICE-TCP listener); its candidates are the
// addresses its configuration names, and the browser's candidates are
// never used: the portal only answers the checks that reach it, so it
// sends to no address an offer names, and it never relays (no TURN).
package rtc

import (
	"errors"
	"fmt"
	"net"

	"github.com/pion/ice/v4"
	"github.com/pion/interceptor"
	"github.com/pion/webrtc/v4"
)

// Config is what a Server is made of.
type Config struct {
	// UDP is the one port every peer's media crosses (ICE-lite, muxed).
	UDP net.PacketConn
	// TCP, if set, takes ICE-TCP (RFC 6544, passive) for browsers whose
	// network drops UDP.
	TCP net.Listener
	// IPs are the addresses given to browsers as the portal's
	// candidates, on UDP's port and TCP's. Empty: the addresses UDP is
	// bound to (a specific address, not a wildcard).
	IPs []string
}

// Server answers offers for the video track of one console each.
type Server struct {
	api *webrtc.API
}

// New returns a Server on cfg's ports. Closing the ports is the caller's.
func New(cfg Config) (*Server, error) {
	if cfg.UDP == nil {
		return nil, errors.New("rtc: no UDP port")
	}
	ips := cfg.IPs
	if len(ips) == 0 {
		a, ok := cfg.UDP.LocalAddr().(*net.UDPAddr)
		if !ok || a.IP.IsUnspecified() {
			return nil, fmt.Errorf("rtc: the UDP port %s is bound to every address: name the addresses browsers reach it by", cfg.UDP.LocalAddr())
		}
		ips = []string{a.IP.String()}
	}
	for _, ip := range ips {
		if net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("rtc: %q is not an IP address", ip)
		}
	}
	var se webrtc.SettingEngine
	se.SetLite(true)
	se.SetICEUDPMux(webrtc.NewICEUDPMux(nil, cfg.UDP))
	nets := []webrtc.NetworkType{webrtc.NetworkTypeUDP4, webrtc.NetworkTypeUDP6}
	if cfg.TCP != nil {
		se.SetICETCPMux(webrtc.NewICETCPMux(nil, cfg.TCP, 64<<10))
		nets = append(nets, webrtc.NetworkTypeTCP4, webrtc.NetworkTypeTCP6)
	}
	se.SetNetworkTypes(nets)
	se.SetIncludeLoopbackCandidate(true)
	se.SetICEMulticastDNSMode(ice.MulticastDNSModeDisabled)
	if err := se.SetICEAddressRewriteRules(webrtc.ICEAddressRewriteRule{External: ips, AsCandidateType: webrtc.ICECandidateTypeHost}); err != nil {
		return nil, fmt.Errorf("rtc: the portal's candidates: %w", err)
	}
	me := new(webrtc.MediaEngine)
	if err := me.RegisterCodec(h264Codec, webrtc.RTPCodecTypeVideo); err != nil {
		return nil, err
	}
	// NACKs answered from the sent packets, RTCP reports, congestion
	// feedback: without them a packet lost from a key frame is lost for
	// good, and the browser asks for another (a ~100-packet key frame at
	// 0.5 % loss arrives whole about half the time). The reports of a
	// track at rest are thinned (quietReports).
	ir := new(interceptor.Registry)
	ir.Add(quietReportsFactory{}) // first: the report interceptor writes through it
	if err := webrtc.RegisterDefaultInterceptors(me, ir); err != nil {
		return nil, err
	}
	return &Server{api: webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(ir))}, nil
}

// h264Codec is the one codec offered: the hub's constrained baseline,
// one NAL unit or fragment per packet, with NACK and key frame requests.
var h264Codec = webrtc.RTPCodecParameters{
	RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType:    webrtc.MimeTypeH264,
		ClockRate:   90000,
		SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f",
		RTCPFeedback: []webrtc.RTCPFeedback{
			{Type: "nack"}, {Type: "nack", Parameter: "pli"}, {Type: "ccm", Parameter: "fir"},
		},
	},
	PayloadType: 102,
}
