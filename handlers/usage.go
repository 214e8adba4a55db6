package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// Usage reads the pools' samples (store.DB), merged into buckets of step.
type Usage interface {
	PoolSamples(ctx context.Context, since time.Time, step time.Duration) ([]vdi.PoolSample, error)
}

// usagePages serves the pools' usage charts and their samples (usage.go).
type usagePages struct {
	*renderer
	desktops Desktops
	usage    Usage
	every    time.Duration
	now      func() time.Time
}

// usageRanges are the spans the charts and GET /api/vdi/usage show, with
// their buckets.
var usageRanges = map[string]struct{ span, step time.Duration }{
	"day":  {24 * time.Hour, vdi.SampleBucket},
	"week": {7 * 24 * time.Hour, time.Hour},
}

// samples returns each pool's samples over range name, by "ns/pool".
func (h *usagePages) samples(ctx context.Context, name string) (map[string][]vdi.PoolSample, error) {
	rg := usageRanges[name]
	if h.usage == nil {
		return nil, nil
	}
	since := h.now().Truncate(rg.step).Add(rg.step - rg.span)
	all, err := h.usage.PoolSamples(ctx, since, rg.step)
	if err != nil {
		return nil, err
	}
	out := map[string][]vdi.PoolSample{}
	for _, s := range all {
		out[s.Namespace+"/"+s.Pool] = append(out[s.Namespace+"/"+s.Pool], s)
	}
	return out, nil
}

// handleUsagePage serves GET /admin/usage: every pool's desktops in use,
// free and warm over the last day and week, refusals and reclaims.
func (h *usagePages) handleUsagePage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	pools, err := h.desktops.Pools(r.Context(), id)
	if err != nil {
		return err
	}
	day, err := h.samples(r.Context(), "day")
	if err != nil {
		return err
	}
	week, err := h.samples(r.Context(), "week")
	if err != nil {
		return err
	}
	now, loc := h.now(), time.Local
	props := views.UsageProps{Page: h.pageProps("Pool usage", id), Zone: now.In(loc).Format("MST"), Every: h.every.String()}
	for _, p := range pools {
		key := p.Namespace + "/" + p.Name
		u := views.UsagePool{Namespace: p.Namespace, Name: p.Name,
			Day: views.UsageAnswer(day[key], false, loc), Week: views.UsageAnswer(week[key], true, loc), Reclaims: views.UsageReclaims(week[key]),
			DayChart:  views.NewUsageChart("Last 24 hours", day[key], now, usageRanges["day"].span, usageRanges["day"].step, loc),
			WeekChart: views.NewUsageChart("Last 7 days", week[key], now, usageRanges["week"].span, usageRanges["week"].step, loc)}
		u.DayChart.Label = "Last 24 hours of " + key + ": " + u.Day
		u.WeekChart.Label = "Last 7 days of " + key + ": " + u.Week
		props.Pools = append(props.Pools, u)
	}
	h.render(w, r, http.StatusOK, views.Usage(props))
	return nil
}

// usageJSON is one pool's samples as GET /api/vdi/usage answers them.
type usageJSON struct {
	Namespace string        `json:"namespace"`
	Pool      string        `json:"pool"`
	Samples   []usageBucket `json:"samples"`
}

// usageBucket is one bucket of a pool's samples.
type usageBucket struct {
	Start    time.Time      `json:"start"`
	Size     int            `json:"size"`
	Claimed  int            `json:"claimed"`
	Free     int            `json:"free"`
	Warm     int            `json:"warm"`
	Refused  int            `json:"refused"`
	Reclaims map[string]int `json:"reclaims"`
}

// handleUsageJSON serves GET /api/vdi/usage?range=day|week (admins): each
// pool's samples over the range, in 5-minute (day) or hourly (week)
// buckets: the most in use, size and warm, the fewest free, the claims
// refused and the reclaims by rule.
func (h *usagePages) handleUsageJSON(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	name := r.URL.Query().Get("range")
	if name == "" {
		name = "day"
	}
	rg, ok := usageRanges[name]
	if !ok {
		return vdi.Errorf(vdi.EInvalid, "Ask for range=day (5-minute buckets) or range=week (hourly).", "%q is not a range of the usage history.", name)
	}
	byPool, err := h.samples(r.Context(), name)
	if err != nil {
		return err
	}
	pools, err := h.desktops.Pools(r.Context(), id)
	if err != nil {
		return err
	}
	out := struct {
		Range string      `json:"range"`
		Step  string      `json:"step"`
		Pools []usageJSON `json:"pools"`
	}{Range: name, Step: rg.step.String(), Pools: []usageJSON{}}
	for _, p := range pools {
		u := usageJSON{Namespace: p.Namespace, Pool: p.Name, Samples: []usageBucket{}}
		for _, s := range byPool[p.Namespace+"/"+p.Name] {
			b := usageBucket{Start: s.Start.UTC(), Size: s.Size, Claimed: s.Claimed, Free: s.Free, Warm: s.Warm, Refused: s.Refused, Reclaims: map[string]int{}}
			for i, rule := range vdi.ReclaimRules {
				b.Reclaims[rule] = s.Reclaims[i]
			}
			u.Samples = append(u.Samples, b)
		}
		out.Pools = append(out.Pools, u)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
