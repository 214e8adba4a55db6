package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// traceCategories are what a bench trace records: the renderer's tasks,
// script compile and evaluation, resource loading and navigation, and the
// page's own performance marks and measures.
var traceCategories = []string{
	"toplevel", "devtools.timeline", "disabled-by-default-devtools.timeline",
	"v8", "v8.execute", "disabled-by-default-v8.compile", "blink", "blink.user_timing",
	"loading", "navigation", "benchmark",
}

// benchTrace is a Chromium performance trace of one page, recorded
// through the DevTools protocol while a bench measures.
type benchTrace struct {
	session playwright.CDPSession
	mu      sync.Mutex
	events  []json.RawMessage
	done    chan struct{}
}

// startBenchTrace starts tracing page of ctx when CORRAL_VDI_BENCH_TRACE
// names a folder; it returns nil otherwise.
func startBenchTrace(t *testing.T, ctx playwright.BrowserContext, page playwright.Page) *benchTrace {
	t.Helper()
	if os.Getenv("CORRAL_VDI_BENCH_TRACE") == "" {
		return nil
	}
	s, err := ctx.NewCDPSession(page)
	must(t, err)
	tr := &benchTrace{session: s, done: make(chan struct{})}
	s.On("Tracing.dataCollected", func(params map[string]any) {
		values, _ := params["value"].([]any)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, v := range values {
			b, err := json.Marshal(v)
			if err == nil {
				tr.events = append(tr.events, b)
			}
		}
	})
	s.On("Tracing.tracingComplete", func(map[string]any) { close(tr.done) })
	_, err = s.Send("Tracing.start", map[string]any{
		"transferMode": "ReportEvents",
		"traceConfig":  map[string]any{"includedCategories": traceCategories},
	})
	must(t, err)
	return tr
}

// stop ends the trace and writes it as name.json in the folder
// CORRAL_VDI_BENCH_TRACE names, in the JSON array format that Perfetto
// (ui.perfetto.dev) and chrome://tracing open.
func (tr *benchTrace) stop(t *testing.T, name string) {
	t.Helper()
	if tr == nil {
		return
	}
	_, err := tr.session.Send("Tracing.end", nil)
	must(t, err)
	select {
	case <-tr.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("trace %s: Chromium did not finish it in 30 s", name)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	b, err := json.Marshal(tr.events)
	must(t, err)
	dir := os.Getenv("CORRAL_VDI_BENCH_TRACE")
	must(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, name+".json")
	must(t, os.WriteFile(path, b, 0o644))
	fmt.Printf("BENCH   trace of %s: %s\n", name, path)
}
