package portal

import (
	"errors"
	"fmt"
	"net"

	"github.com/corral-dev/corral-vdi-portal/rtc"
)

// openWebRTC opens the WebRTC video path's ports when the configuration
// names them (nil when it does not), closed by Close.
func (m *Main) openWebRTC() (*rtc.Server, error) {
	c := m.Config.Console
	if c.WebRTCUDP == "" {
		if c.WebRTCTCP != "" || len(c.WebRTCIPs) > 0 {
			return nil, errors.New("webrtc-tcp and webrtc-ips need webrtc-udp (CORRAL_VDI_WEBRTC_UDP): set it, or leave them empty")
		}
		return nil, nil
	}
	if c.H264 == "" {
		return nil, errors.New("webrtc-udp sends the screen's H.264, which is off (h264 is off, or auto found no encoder that works here: its log line above says why): install the encoder or set h264 (CORRAL_VDI_H264=gst-launch-1.0, unix:PATH), or leave webrtc-udp empty")
	}
	udp, err := net.ListenPacket("udp", c.WebRTCUDP)
	if err != nil {
		return nil, fmt.Errorf("webrtc-udp %s: %w", c.WebRTCUDP, err)
	}
	m.closers = append(m.closers, udp.Close)
	cfg := rtc.Config{UDP: udp, IPs: c.WebRTCIPs}
	if c.WebRTCTCP != "" {
		ln, err := net.Listen("tcp", c.WebRTCTCP)
		if err != nil {
			return nil, fmt.Errorf("webrtc-tcp %s: %w", c.WebRTCTCP, err)
		}
		m.closers = append(m.closers, ln.Close)
		cfg.TCP = ln
	}
	s, err := rtc.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("webrtc-udp: %w", err)
	}
	m.Log.Info("WebRTC video path open", "udp", udp.LocalAddr(), "tcp", c.WebRTCTCP, "candidates", c.WebRTCIPs)
	return s, nil
}
