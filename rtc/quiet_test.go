package rtc

import (
	"testing"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
)

// TestQuietReports: a stream's sender report goes out while it sends and
// not while it rests; other RTCP always goes.
func TestQuietReports(t *testing.T) {
	i, err := quietReportsFactory{}.NewInterceptor("")
	if err != nil {
		t.Fatal(err)
	}
	var got []rtcp.Packet
	w := i.BindRTCPWriter(interceptor.RTCPWriterFunc(func(pkts []rtcp.Packet, _ interceptor.Attributes) (int, error) {
		got = append(got, pkts...)
		return len(pkts), nil
	}))
	sr := func(ssrc, count uint32) *rtcp.SenderReport { return &rtcp.SenderReport{SSRC: ssrc, PacketCount: count} }
	steps := []struct {
		name string
		pkts []rtcp.Packet
		want int
	}{
		{"first report", []rtcp.Packet{sr(1, 10)}, 1},
		{"at rest", []rtcp.Packet{sr(1, 10)}, 0},
		{"at rest again", []rtcp.Packet{sr(1, 10)}, 0},
		{"sent meanwhile", []rtcp.Packet{sr(1, 12)}, 1},
		{"another stream's first", []rtcp.Packet{sr(2, 12)}, 1},
		{"a key frame request beside a rest", []rtcp.Packet{sr(1, 12), &rtcp.PictureLossIndication{MediaSSRC: 1}}, 1},
	}
	for _, s := range steps {
		got = nil
		if _, err := w.Write(s.pkts, nil); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if len(got) != s.want {
			t.Errorf("%s: %d packets written; want %d (%v)", s.name, len(got), s.want, got)
		}
	}
}
