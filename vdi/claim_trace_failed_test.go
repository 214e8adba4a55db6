package vdi_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testlog"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// refusingLeases is a claim store that does not answer a write: the
// Lease's create fails as an API server's outage fails it.
type refusingLeases struct{ vdi.Leases }

func (refusingLeases) Create(context.Context, *vdi.Lease) (*vdi.Lease, error) {
	return nil, &vdi.Error{Code: vdi.EUnavailable, Msg: "The Kubernetes API server does not answer.", Hint: "Try again in a minute."}
}

// TestClaimTrace_FailedClaimSaysWhere: a claim that fails at once (its
// store does not answer) logs its trace at Info, as a slow one does, so
// that an admin reading the Info logs sees where it failed beside the
// handlers' Warn or Error; a claim refused (none free) stays at Debug.
func TestClaimTrace_FailedClaimSaysWhere(t *testing.T) {
	for _, c := range []struct {
		name   string
		failed bool
	}{{"StoreDoesNotAnswer", true}, {"NoneFree", false}} {
		t.Run(c.name, func(t *testing.T) {
			db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "portal.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var logs testlog.Buffer
			b := newPoolBackend(vdi.ModeEphemeral, "demo-1")
			b.power["demo-1"] = vdi.PowerRunning
			var leases vdi.Leases = db.Leases()
			if c.failed {
				leases = refusingLeases{leases}
			}
			svc := vdi.NewService(vdi.Config{Backend: b, Leases: leases, Audit: db,
				Log: slog.New(slog.NewTextHandler(&logs, nil))})
			if !c.failed {
				if _, err := svc.Claim(context.Background(), vdi.Identity{Login: "bob"}, "local", "demo"); err != nil {
					t.Fatal(err)
				}
			}
			_, err = svc.Claim(context.Background(), vdi.Identity{Login: "alice"}, "local", "demo")
			want := map[bool]vdi.Code{true: vdi.EUnavailable, false: vdi.EConflict}[c.failed]
			if got := vdi.ErrorCode(err); got != want {
				t.Fatalf("alice's claim: %v (%s); want %s", err, got, want)
			}
			line := regexp.MustCompile(`level=INFO msg=claim user=alice took=\S+ steps="[^"]*" err="?([^"\n]*)`).FindStringSubmatch(logs.String())
			switch {
			case c.failed && line == nil:
				t.Fatalf("logs:\n%s\nwant an Info line of alice's failed claim with its steps", logs.String())
			case c.failed && !strings.Contains(line[1], "API server does not answer"):
				t.Errorf("alice's failed claim's Info line ends %q; want the store's words", line[1])
			case !c.failed && line != nil:
				t.Errorf("logs:\n%s\nwant no Info line of alice's claim, refused as none is free", logs.String())
			}
		})
	}
}
