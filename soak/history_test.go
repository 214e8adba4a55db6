package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/store"
)

// faultSQLiteReadOnly makes a replica's SQLite file unwritable (chattr +i:
// even root, even through open descriptors): history degrades, claims
// (Leases) keep working through that replica.
func faultSQLiteReadOnly(t *testing.T, sc scale, r *report, e *kubeEnv) {
	ctx := context.Background()
	p := e.replicas[2]
	files, _ := filepath.Glob(filepath.Join(p.Data, "*.db*"))
	if len(files) == 0 {
		r.add("fault", "SQLite read-only: file found", false, "a .db file", "none in %s", p.Data)
		return
	}
	if out, err := exec.Command("chattr", append([]string{"+i"}, files...)...).CombinedOutput(); err != nil {
		r.add("fault", "SQLite read-only: chattr +i", false, "done", "%v %s", err, out)
		return
	}
	defer exec.Command("chattr", append([]string{"-i"}, files...)...).Run()
	var errs []string
	for i := range 5 {
		if err := e.claimRelease(ctx, p, fmt.Sprintf("ro%d", i)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	r.add("fault", "SQLite read-only: claims keep working", len(errs) == 0, "5 of 5 claim+release 200", "%d failed %s", len(errs), strings.Join(errs, "; "))
	var ready map[string]string
	took, ok := eventually(20*time.Second, func() bool {
		code, buf, _ := call(ctx, p.URL, "", "GET", "/readyz", "")
		ready, _ = decode[map[string]string](buf)
		return code == 200 && ready["degraded"] != ""
	})
	r.add("fault", "SQLite read-only: /readyz ready, history degraded", ok, "200 with a warning within 20 s", "after %s: %v", took.Round(100*time.Millisecond), ready)
}

// faultSQLiteDeleted deletes a replica's SQLite files under it: claims
// keep working (they are Leases), and /readyz and the pages warn that what
// the replica writes now is lost when it restarts, saying what to do.
func faultSQLiteDeleted(t *testing.T, sc scale, r *report, e *kubeEnv) {
	ctx := context.Background()
	p := e.replicas[1]
	files, _ := filepath.Glob(filepath.Join(p.Data, "*.db*"))
	if len(files) == 0 {
		r.add("fault", "SQLite deleted: file found", false, "a .db file", "none in %s", p.Data)
		return
	}
	for _, f := range files {
		os.Remove(f)
	}
	var errs []string
	for i := range 5 {
		if err := e.claimRelease(ctx, p, fmt.Sprintf("del%d", i)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	r.add("fault", "SQLite deleted: claims keep working", len(errs) == 0, "5 of 5 claim+release 200", "%d failed %s", len(errs), strings.Join(errs, "; "))
	code, buf, _ := call(ctx, p.URL, "", "GET", "/readyz", "")
	ready, _ := decode[map[string]string](buf)
	r.add("fault", "SQLite deleted: /readyz ready, warns what is lost", code == 200 && strings.Contains(ready["degraded"], "was deleted") &&
		strings.Contains(ready["degraded"], "restore the file"), "200 with the warning", "%d %.200v", code, ready)
}

// faultPostgresPaused runs one more kube replica on a real PostgreSQL and
// pauses the database (SIGSTOP): claims keep working, the audit rows wait
// in the portal's buffer and are written once, after it answers again.
func faultPostgresPaused(t *testing.T, sc scale, r *report, e *kubeEnv) {
	var ran bool
	t.Run("postgres", func(t *testing.T) {
		pg := testpg.Shared(t) // skips when PostgreSQL is not installed
		t.Cleanup(testpg.Stop)
		ran = true
		url := pg.NewDatabase(t)
		data, _ := os.MkdirTemp("", "cvp")
		t.Cleanup(func() { os.RemoveAll(data) })
		p := startPortal(t, data, "127.0.0.1:0", append(append([]string{}, e.replicas[0].env...), "CORRAL_VDI_DATABASE_URL="+url)...)
		ctx := context.Background()
		pg.Pause(t, true)
		paused := true
		defer func() {
			if paused {
				pg.Pause(t, false)
			}
		}()
		var errs []string
		n := 5
		for i := range n {
			if err := e.claimRelease(ctx, p, fmt.Sprintf("pg%d", i)); err != nil {
				errs = append(errs, err.Error())
			}
		}
		r.add("fault", "PostgreSQL paused: claims keep working", len(errs) == 0, fmt.Sprintf("%d of %d claim+release 200", n, n), "%d failed %s", len(errs), strings.Join(errs, "; "))
		code, buf, _ := call(ctx, p.URL, "", "GET", "/readyz", "")
		ready, _ := decode[map[string]string](buf)
		r.add("fault", "PostgreSQL paused: /readyz ready, history degraded", code == 200 && ready["degraded"] != "", "200 with a warning", "%d %v", code, ready)
		pg.Pause(t, false)
		paused = false
		db, err := store.OpenPostgres(ctx, url, "")
		if err != nil {
			r.add("fault", "PostgreSQL resumed: buffered audit written", false, "open", "%v", err)
			return
		}
		defer db.Close()
		claims := 0
		took, _ := eventually(45*time.Second, func() bool {
			entries, err := db.AuditLog(ctx, 200)
			if err != nil {
				return false
			}
			claims = 0
			for _, a := range entries {
				if a.Action == "claim" && strings.HasPrefix(a.Actor, "pg") {
					claims++
				}
			}
			return claims >= n
		})
		r.add("fault", "PostgreSQL resumed: buffered audit written once", claims == n, fmt.Sprintf("%d claim rows within 45 s", n), "%d after %s", claims, took.Round(100*time.Millisecond))
	})
	if !ran {
		r.add("fault", "PostgreSQL paused", false, "run", "PostgreSQL is not installed (scripts/deps.sh --test)")
	}
}
