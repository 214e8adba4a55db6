package rtc

import (
	"sync"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
)

// restReports is how often a stream at rest still sends a sender report.
const restReports = 5 * time.Second

// quietReports is an interceptor that thins the RTCP sender reports of a
// stream at rest. pion's report interceptor sends one a second for as
// long as the peer lives, so a still screen (no frames: the hub encodes
// only after damage) would cost ~70 bytes a second, with the answers to
// the browser's consent checks over an idle console's budget of 4 KiB a
// minute. While a stream sends, every report goes (as before); once it
// has sent nothing since its last report, one report in restReports goes
// (RFC 3550's own minimum interval), so the browser's clock mapping and
// report blocks stay fresh and the path is never silent for long.
type quietReports struct {
	interceptor.NoOp
	now  func() time.Time
	mu   sync.Mutex
	last map[uint32]srSent // each stream's last report that went
}

// srSent is what a stream's last sent sender report said, and when.
type srSent struct {
	count uint32
	at    time.Time
}

// quietReportsFactory makes one quietReports per peer.
type quietReportsFactory struct{}

// NewInterceptor implements interceptor.Factory.
func (quietReportsFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &quietReports{now: time.Now, last: map[uint32]srSent{}}, nil
}

// BindRTCPWriter implements interceptor.Interceptor: it passes on every
// packet but the sender reports a stream at rest sends too often.
func (q *quietReports) BindRTCPWriter(w interceptor.RTCPWriter) interceptor.RTCPWriter {
	return interceptor.RTCPWriterFunc(func(pkts []rtcp.Packet, a interceptor.Attributes) (int, error) {
		keep := make([]rtcp.Packet, 0, len(pkts))
		for _, p := range pkts {
			if sr, ok := p.(*rtcp.SenderReport); ok && !q.sends(sr) {
				continue
			}
			keep = append(keep, p)
		}
		if len(keep) == 0 {
			return 0, nil
		}
		return w.Write(keep, a)
	})
}

// sends reports whether sr goes: its stream sent since its last report,
// or has been at rest restReports since then, or sr carries report blocks.
func (q *quietReports) sends(sr *rtcp.SenderReport) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	last, seen := q.last[sr.SSRC]
	if seen && last.count == sr.PacketCount && len(sr.Reports) == 0 && now.Sub(last.at) < restReports {
		return false
	}
	q.last[sr.SSRC] = srSent{sr.PacketCount, now}
	return true
}
