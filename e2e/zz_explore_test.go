package e2e

import (
	"encoding/json"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestZZExplore(t *testing.T) {
	dir := os.Getenv("AUS")
	if dir == "" {
		t.Skip()
	}
	mux := http.NewServeMux()
	mux.Handle("/novnc/", http.StripPrefix("/novnc/", http.FileServer(http.Dir("../node_modules/@novnc/novnc"))))
	mux.Handle("/aus/", http.StripPrefix("/aus/", http.FileServer(http.Dir(dir))))
	mux.Handle("/", http.FileServer(http.Dir("/tmp/s25-56-page")))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 800, 600)
	page.On("console", func(m any) { t.Logf("console: %v", m) })
	if _, err := page.Goto(srv.URL + "/index.html"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "ready", func() bool { v, _ := page.Evaluate("() => window.ready === true"); return v == true })
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	type group struct {
		N     int `json:"n"`
		Flags int `json:"flags"`
	}
	for round := 0; round < 5; round++ {
		var groups []group
		for i := 0; i < len(names); {
			n := 1
			if os.Getenv("GROUP") != "" {
				n = 1 + rng.Intn(3)
			}
			if i+n > len(names) {
				n = len(names) - i
			}
			// a key frame of a new encoder starts its own group, with reset
			for j := 1; j < n; j++ {
				if strings.HasSuffix(names[i+j], "true.h264") {
					n = j
				}
			}
			f := 0
			if strings.HasSuffix(names[i], "true.h264") {
				f = 1
			}
			groups = append(groups, group{n, f})
			i += n
		}
		v, err := page.Evaluate("([n, g, t]) => window.run(n, g, t)", []any{names, groups, 5000})
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(v)
		t.Logf("round %d: %s", round, j)
	}
	_ = filepath.Join
}
