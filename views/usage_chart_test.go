package views

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestUsageChart: a morning that fills a pool of 3 draws a bar per
// bucket, the size line joined over adjacent buckets and broken over a
// gap, a red band where claims were refused, and says so in one line.
func TestUsageChart(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	samples := []vdi.PoolSample{
		{Start: at(0), Size: 3, Claimed: 1, Free: 2, Warm: 1},
		{Start: at(5), Size: 3, Claimed: 3, Free: 0, Refused: 2},
		{Start: at(10), Size: 3, Claimed: 2, Free: 1, Reclaims: [4]int{0, 1, 0, 0}},
		{Start: at(30), Size: 3, Claimed: 0, Free: 3, Warm: 1}, // after a gap
	}
	c := NewUsageChart("Last 24 hours", samples, at(32), 24*time.Hour, vdi.SampleBucket, time.UTC)
	if c.Empty || len(c.Bars) != 4 {
		t.Fatalf("chart has %d bars (empty %v); want 4", len(c.Bars), c.Empty)
	}
	if n := strings.Count(c.Size, "M"); n != 2 {
		t.Errorf("size line %q has %d pieces; want 2 (joined, then broken by the gap)", c.Size, n)
	}
	if len(c.Refused) != 1 || c.Refused[0].N != 2 || c.Refused[0].X != c.Bars[1].X {
		t.Errorf("refused bands = %+v; want one of 2 claims on the second bar (x %v)", c.Refused, c.Bars[1].X)
	}
	if full, one := c.Bars[1], c.Bars[0]; full.UseH <= one.UseH || full.FreeH != 0 || full.UseY != usageY0 {
		t.Errorf("full bar %+v beside one in use %+v; want it taller, to the top (y %v), nothing free", full, one, usageY0)
	}
	if last := c.Bars[3]; last.X+last.W > usageX1+0.1 {
		t.Errorf("now's bucket ends at %v, past the plot's end %v", last.X+last.W, usageX1)
	}
	for _, b := range c.Bars {
		if b.W < usageMinW {
			t.Errorf("a 5-minute bar of a day is %v units wide; want at least %v (seen on a phone)", b.W, usageMinW)
		}
	}
	if got := len(c.XTicks); got != 4 {
		t.Errorf("day chart has %d time labels %+v; want 4 (every 6 hours)", got, c.XTicks)
	}
	if got := NewUsageChart("Last 7 days", nil, at(32), 7*24*time.Hour, time.Hour, time.UTC); !got.Empty || len(got.XTicks) != 7 {
		t.Errorf("empty week: empty %v, %d day labels; want empty, 7", got.Empty, len(got.XTicks))
	}

	for _, tc := range []struct {
		samples []vdi.PoolSample
		week    bool
		want    string
	}{
		{samples, false, "Peaked at 3 of 3 in use at 09:05; ran out of free desktops at 09:05; 2 claims refused."},
		{samples[2:], true, "Peaked at 2 of 3 in use on Sat 09:10–10:10; never ran out; no claim refused."},
		{nil, false, "No samples yet."},
	} {
		if got := UsageAnswer(tc.samples, tc.week, time.UTC); got != tc.want {
			t.Errorf("UsageAnswer(%d samples, week %v) = %q; want %q", len(tc.samples), tc.week, got, tc.want)
		}
	}
	if got, want := UsageReclaims(samples), "Reclaimed: 1 for session limit."; got != want {
		t.Errorf("UsageReclaims = %q; want %q", got, want)
	}
}

func TestNiceStep(t *testing.T) {
	for top, want := range map[int]int{1: 1, 5: 1, 6: 2, 10: 2, 11: 5, 25: 5, 26: 10, 400: 100} {
		if got := niceStep(top); got != want {
			t.Errorf("niceStep(%d) = %d; want %d", top, got, want)
		}
	}
}
