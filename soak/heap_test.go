package soak

import (
	"context"
	"fmt"
	"time"
)

// liveHeap reads the portal's go_gc_heap_live_bytes and its collections so
// far (go_gc_duration_seconds_count) from its /metrics.
func liveHeap(ctx context.Context, p *portal) (live, collections float64, err error) {
	code, buf, err := call(ctx, p.URL, "", "GET", "/metrics", "")
	if err != nil || code != 200 {
		return 0, 0, fmt.Errorf("/metrics: %d %v", code, err)
	}
	live, ok := metricValue(buf, "go_gc_heap_live_bytes")
	collections, ok2 := metricValue(buf, "go_gc_duration_seconds_count")
	if !ok || !ok2 {
		return 0, 0, fmt.Errorf("/metrics has no go_gc_heap_live_bytes or go_gc_duration_seconds_count")
	}
	return live, collections, nil
}

// liveHeapAfter waits until the portal has collected garbage since it had
// done `since` collections and returns the heap that collection found
// live. Go collects at the latest every 2 minutes (the runtime's forced
// collection), so the wait is bounded; a busy portal collects sooner.
func liveHeapAfter(ctx context.Context, p *portal, since float64) (float64, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 150*time.Second)
	defer cancel()
	for {
		live, n, err := liveHeap(ctx, p)
		if err == nil && n > since {
			return live, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, time.Since(start), fmt.Errorf("no collection in %s (%v)", time.Since(start).Round(time.Second), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
