package rtc

import (
	"sync"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
)

// quietReports is an interceptor that drops a sender report for a
// stream that sent no RTP since its last report. pion's report
// interceptor sends one a second for as long as the peer lives, so a
// still screen (no frames: the hub encodes only after damage) would
// still cost ~70 bytes a second, over an idle console's budget of
// keepalives; RFC 3550 (6.4) has a source that is not sending stop
// sending SRs. The browser's consent checks, which the portal answers,
// keep the path open.
type quietReports struct {
	interceptor.NoOp
	mu   sync.Mutex
	last map[uint32]uint32 // each stream's packet count in its last report
}

// quietReportsFactory makes one quietReports per peer.
type quietReportsFactory struct{}

// NewInterceptor implements interceptor.Factory.
func (quietReportsFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &quietReports{last: map[uint32]uint32{}}, nil
}

// BindRTCPWriter implements interceptor.Interceptor: it passes on every
// packet but the sender reports of streams at rest.
func (q *quietReports) BindRTCPWriter(w interceptor.RTCPWriter) interceptor.RTCPWriter {
	return interceptor.RTCPWriterFunc(func(pkts []rtcp.Packet, a interceptor.Attributes) (int, error) {
		keep := make([]rtcp.Packet, 0, len(pkts))
		for _, p := range pkts {
			if sr, ok := p.(*rtcp.SenderReport); ok && q.atRest(sr) {
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

// atRest reports whether sr's stream sent nothing since its last report.
func (q *quietReports) atRest(sr *rtcp.SenderReport) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	last, seen := q.last[sr.SSRC]
	q.last[sr.SSRC] = sr.PacketCount
	return seen && last == sr.PacketCount && len(sr.Reports) == 0
}
