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

// claimRunning claims a desktop of ns/pool as user through the API and
// waits until it runs: a claim answers as soon as it is won, while a VM
// may still boot.
func (p *Portal) claimRunning(tb testing.TB, user, ns, pool string) desktop {
	tb.Helper()
	var d desktop
	if code := p.API(tb, user, "POST", "/api/vdi/pools/"+ns+"/"+pool+"/claim", &d); code != 200 {
		tb.Fatalf("%s claims a desktop of %s/%s: %d", user, ns, pool, code)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for d.Power != "running" {
		if d.Power != "starting" && d.Power != "stopped" || time.Now().After(deadline) {
			tb.Fatalf("%s's desktop %s/%s is %s; want it running", user, d.Namespace, d.Name, d.Power)
		}
		time.Sleep(200 * time.Millisecond)
		if code := p.API(tb, user, "GET", "/api/vdi/desktops/"+d.Namespace+"/"+d.Name, &d); code != 200 {
			tb.Fatalf("GET %s's desktop %s/%s: %d", user, d.Namespace, d.Name, code)
		}
	}
	return d
}
