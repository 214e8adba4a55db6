package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

// job is the JSON shape of a pool's job.
type job struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	State     string `json:"state"`
	Progress  string `json:"progress"`
	Done      int    `json:"done"`
	Total     int    `json:"total"`
	Error     string `json:"error"`
	Hint      string `json:"hint"`
}

// CreatePool creates a pool as user with body (POST /api/vdi/pools); see
// awaitJob.
func (p *Portal) CreatePool(tb testing.TB, user, body string, perr *apiError) int {
	tb.Helper()
	return p.awaitJob(tb, user, "POST", "/api/vdi/pools", body, 201, perr)
}

// awaitJob sends the request and, when the portal answers 202 with a job
// (cloning or removing VMs), follows the job until it ends: it returns
// done (the status of the same work done at once) once the job is done,
// and the error of a refused request or a failed job in perr.
func (p *Portal) awaitJob(tb testing.TB, user, method, path, body string, done int, perr *apiError) int {
	tb.Helper()
	var raw json.RawMessage
	code := p.APIBody(tb, user, method, path, body, &raw)
	if code != 202 {
		if perr != nil {
			json.Unmarshal(raw, perr)
		}
		return code
	}
	var j job
	if err := json.Unmarshal(raw, &j); err != nil {
		tb.Fatalf("202 with %s: %v", raw, err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for j.State == "running" {
		if time.Now().After(deadline) {
			tb.Fatalf("job %s (%s of pool %s/%s) still running after 5m: %s", j.ID, j.Kind, j.Namespace, j.Pool, j.Progress)
		}
		time.Sleep(200 * time.Millisecond)
		if c := p.API(tb, user, "GET", "/api/vdi/pools/"+j.Namespace+"/"+j.Pool+"/job", &j); c != 200 {
			tb.Fatalf("GET the job of %s/%s: %d", j.Namespace, j.Pool, c)
		}
	}
	if j.State != "done" {
		if perr != nil {
			*perr = apiError{Error: j.Error, Hint: j.Hint}
		}
		return 500
	}
	return done
}
