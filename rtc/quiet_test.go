package rtc

import (
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
)

// TestQuietReports: a stream's sender report goes each time while it
// sends, and one in restReports while it rests; other RTCP always goes.
func TestQuietReports(t *testing.T) {
	i, err := quietReportsFactory{}.NewInterceptor("")
	if err != nil {
		t.Fatal(err)
	}
	q := i.(*quietReports)
	now := time.Unix(1000, 0)
	q.now = func() time.Time { return now }
	var got []rtcp.Packet
	w := i.BindRTCPWriter(interceptor.RTCPWriterFunc(func(pkts []rtcp.Packet, _ interceptor.Attributes) (int, error) {
		got = append(got, pkts...)
		return len(pkts), nil
	}))
	sr := func(ssrc, count uint32) *rtcp.SenderReport { return &rtcp.SenderReport{SSRC: ssrc, PacketCount: count} }
	steps := []struct {
		name  string
		after time.Duration // since the step before
		pkts  []rtcp.Packet
		want  int
	}{
		{"first report", 0, []rtcp.Packet{sr(1, 10)}, 1},
		{"sent meanwhile", time.Second, []rtcp.Packet{sr(1, 12)}, 1},
		{"at rest", time.Second, []rtcp.Packet{sr(1, 12)}, 0},
		{"at rest 4 s", 3 * time.Second, []rtcp.Packet{sr(1, 12)}, 0},
		{"at rest 5 s", time.Second, []rtcp.Packet{sr(1, 12)}, 1},
		{"at rest 6 s", time.Second, []rtcp.Packet{sr(1, 12)}, 0},
		{"at rest 10 s", 4 * time.Second, []rtcp.Packet{sr(1, 12)}, 1},
		{"sent again", time.Second, []rtcp.Packet{sr(1, 13)}, 1},
		{"sent again, a second on", time.Second, []rtcp.Packet{sr(1, 20)}, 1},
		{"another stream's first", 0, []rtcp.Packet{sr(2, 20)}, 1},
		{"report blocks at rest", time.Second, []rtcp.Packet{&rtcp.SenderReport{SSRC: 2, PacketCount: 20, Reports: []rtcp.ReceptionReport{{SSRC: 9}}}}, 1},
		{"a key frame request beside a rest", time.Second, []rtcp.Packet{sr(1, 20), &rtcp.PictureLossIndication{MediaSSRC: 1}}, 1},
	}
	for _, s := range steps {
		now = now.Add(s.after)
		got = nil
		if _, err := w.Write(s.pkts, nil); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if len(got) != s.want {
			t.Errorf("%s: %d packets written; want %d (%v)", s.name, len(got), s.want, got)
		}
	}
}
