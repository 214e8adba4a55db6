package views

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// UsageChart is one pool's chart over one span, drawn as an SVG of
// UsageW×UsageH: a bar per bucket of desktops in use with the fewest free
// stacked on it, the pool's size and its warm desktops as lines, and a red
// band with a mark above the plot where claims were refused.
type UsageChart struct {
	// Title names the span ("Last 24 hours"); Label says what the chart
	// shows in words, for screen readers.
	Title, Label string
	Bars         []UsageBar
	// Size and Warm are SVG path data.
	Size, Warm     string
	Refused        []UsageBand
	YTicks, XTicks []UsageTick
	// Empty is set when the span has no samples.
	Empty bool
}

// UsageBar is one bucket's bar: in use from the bottom, free above it.
type UsageBar struct {
	X, W, UseY, UseH, FreeY, FreeH float64
}

// UsageBand marks a bucket with refused claims.
type UsageBand struct {
	X, W float64
	N    int
}

// UsageTick is an axis label at a position (X or Y, per axis).
type UsageTick struct {
	At    float64
	Label string
}

// The chart's frame in SVG units: the plot spans x in [usageX0, usageX1]
// and y in [usageY0, usageY1] (the bottom).
const (
	UsageW  = 480
	UsageH  = 170
	usageX0 = 36.0
	usageX1 = 472.0
	usageY0 = 22.0 // above it, the refusals' marks
	usageY1 = 146.0
	// usageMinW is the narrowest a bar or band is drawn: a day's bucket
	// is 1.5 units wide, too thin to see on a phone (a morning's rush of
	// a few minutes was a hairline at the chart's edge).
	usageMinW = 4.0
)

// NewUsageChart draws samples (one pool's, in buckets of step, oldest
// first) over the span ending with now's bucket; times are labelled in
// loc.
func NewUsageChart(title string, samples []vdi.PoolSample, now time.Time, span, step time.Duration, loc *time.Location) UsageChart {
	to := now.Truncate(step).Add(step)
	from := to.Add(-span)
	c := UsageChart{Title: title, Empty: true}
	top := 1
	for _, s := range samples {
		top = max(top, s.Size, s.Claimed+s.Free, s.Warm)
	}
	tick := niceStep(top)
	top = (top + tick - 1) / tick * tick
	x := func(t time.Time) float64 {
		return usageX0 + float64(t.Sub(from))/float64(span)*(usageX1-usageX0)
	}
	y := func(n int) float64 { return usageY1 - float64(n)/float64(top)*(usageY1-usageY0) }
	for n := 0; n <= top; n += tick {
		c.YTicks = append(c.YTicks, UsageTick{At: round(y(n)), Label: fmt.Sprint(n)})
	}
	c.XTicks = timeTicks(from, to, span, loc, x)
	w := float64(step) / float64(span) * (usageX1 - usageX0)
	var size, warm strings.Builder
	var last time.Time
	for _, s := range samples {
		if s.Start.Before(from) || !s.Start.Before(to) {
			continue
		}
		c.Empty = false
		x0 := x(s.Start)
		bx, bw := visible(x0, w)
		c.Bars = append(c.Bars, UsageBar{X: bx, W: bw, UseY: round(y(s.Claimed)), UseH: round(usageY1 - y(s.Claimed)),
			FreeY: round(y(s.Claimed + s.Free)), FreeH: round(y(s.Claimed) - y(s.Claimed+s.Free))})
		joined := !last.IsZero() && s.Start.Sub(last) == step
		stepTo(&size, joined, x0, w, y(s.Size))
		stepTo(&warm, joined, x0, w, y(s.Warm))
		last = s.Start
		if s.Refused > 0 {
			c.Refused = append(c.Refused, UsageBand{X: bx, W: bw, N: s.Refused})
		}
	}
	c.Size, c.Warm = size.String(), warm.String()
	return c
}

// visible returns a bar's x and width for a bucket at x of width w, at
// least usageMinW wide and inside the plot.
func visible(x, w float64) (float64, float64) {
	w = max(w, usageMinW)
	return round(min(x, usageX1-w)), round(w)
}

// stepTo continues a stepped line over one bucket at height y, joined to
// the previous bucket's or starting afresh after a gap.
func stepTo(b *strings.Builder, joined bool, x, w, y float64) {
	if joined {
		fmt.Fprintf(b, "V%g", round(y))
	} else {
		fmt.Fprintf(b, "M%g %g", round(x), round(y))
	}
	fmt.Fprintf(b, "H%g", round(x+w))
}

// timeTicks labels the hours 0, 6, 12 and 18 of a day's span, and the
// midnights of a longer one.
func timeTicks(from, to time.Time, span time.Duration, loc *time.Location, x func(time.Time) float64) []UsageTick {
	var out []UsageTick
	day := span > 24*time.Hour
	t := from.In(loc).Truncate(time.Hour)
	for ; t.Before(to); t = t.Add(time.Hour) {
		if t.Before(from) || t.Minute() != 0 {
			continue
		}
		switch {
		case day && t.Hour() == 0:
			out = append(out, UsageTick{At: round(x(t)), Label: t.Format("Mon")})
		case !day && t.Hour()%6 == 0:
			out = append(out, UsageTick{At: round(x(t)), Label: t.Format("15:04")})
		}
	}
	return out
}

// niceStep is a step of 1, 2 or 5 times a power of ten that divides
// 0..top into at most five ticks.
func niceStep(top int) int {
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if top <= 5*m*p {
				return m * p
			}
		}
	}
}

func round(f float64) float64 { return math.Round(f*10) / 10 }

// UsageAnswer says in one line what samples (one pool's, oldest first)
// show over a span: the peak in use and when, when the pool first ran out
// of free desktops, and how many claims it refused.
func UsageAnswer(samples []vdi.PoolSample, week bool, loc *time.Location) string {
	if len(samples) == 0 {
		return "No samples yet."
	}
	when := func(t time.Time) string {
		if week {
			t = t.In(loc)
			return "on " + t.Format("Mon 15:04") + "–" + t.Add(time.Hour).Format("15:04")
		}
		return "at " + t.In(loc).Format("15:04")
	}
	peak, refused := samples[0], 0
	var out *vdi.PoolSample
	for i, s := range samples {
		if s.Claimed > peak.Claimed {
			peak = s
		}
		if out == nil && s.Free == 0 && s.Size > 0 {
			out = &samples[i]
		}
		refused += s.Refused
	}
	parts := []string{fmt.Sprintf("Peaked at %d of %d in use %s", peak.Claimed, peak.Size, when(peak.Start))}
	if out != nil {
		parts = append(parts, "ran out of free desktops "+when(out.Start))
	} else {
		parts = append(parts, "never ran out")
	}
	parts = append(parts, plural(refused, "claim")+" refused")
	if refused == 0 {
		parts[len(parts)-1] = "no claim refused"
	}
	return strings.Join(parts, "; ") + "."
}

// UsageReclaims says how many desktops the reclaim loop took back over
// samples, by rule.
func UsageReclaims(samples []vdi.PoolSample) string {
	var by [len(vdi.ReclaimRules)]int
	for _, s := range samples {
		for i, n := range s.Reclaims {
			by[i] += n
		}
	}
	var parts []string
	for i, n := range by {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d for %s", n, ruleText(vdi.ReclaimRules[i])))
		}
	}
	if len(parts) == 0 {
		return "No desktop reclaimed."
	}
	return "Reclaimed: " + strings.Join(parts, ", ") + "."
}
