package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func testHistory(t *testing.T, open opener) {
	ctx := context.Background()
	db := open(t)
	t0 := time.Unix(1_800_000_000, 0)
	now := t0
	db.Now = func() time.Time { return now }
	for i, s := range []store.Session{
		{ID: "a", Login: "alice", Namespace: "local", Member: "demo-1", Protocol: "vnc", Path: "direct"},
		{ID: "b", Login: "bob", Namespace: "local", Member: "lab-1", Protocol: "rdp", Path: "direct"},
		{ID: "c", Login: "alice", Namespace: "local", Member: "lab-2", Protocol: "vnc", Path: "direct"},
	} {
		now = t0.Add(time.Duration(i) * time.Hour)
		if err := db.OpenSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := db.Record(ctx, vdi.AuditEvent{Actor: s.Login, Action: "claim", Namespace: "local", Target: s.Member}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CloseSession(ctx, "a", 1, 2, "closed", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Record(ctx, vdi.AuditEvent{Actor: "ops", Action: "force-release", Namespace: "local", Target: "lab-2", Detail: "holder alice; reason: x"}); err != nil {
		t.Fatal(err)
	}

	ids := func(ss []store.Session) (out []string) {
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		f    store.HistoryFilter
		want []string
	}{
		{"all", store.HistoryFilter{}, []string{"c", "b", "a"}},
		{"user", store.HistoryFilter{User: "alice"}, []string{"c", "a"}},
		{"pool", store.HistoryFilter{Targets: []string{"lab-1", "lab-2", "lab"}}, []string{"c", "b"}},
		{"empty pool", store.HistoryFilter{Targets: []string{}}, nil},
		{"since", store.HistoryFilter{Since: t0.Add(time.Hour)}, []string{"c", "b"}},
		{"until", store.HistoryFilter{Until: t0.Add(time.Hour)}, []string{"a"}},
		{"limit", store.HistoryFilter{Limit: 1}, []string{"c"}},
		{"injection is data", store.HistoryFilter{User: "' OR 1=1 --"}, nil},
	} {
		t.Run("Sessions/"+tc.name, func(t *testing.T) {
			got, err := db.SessionHistory(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if g := ids(got); !slices.Equal(g, tc.want) {
				t.Errorf("SessionHistory(%+v) = %v; want %v", tc.f, g, tc.want)
			}
		})
	}
	t.Run("AuditUserMatchesActorOrHolder", func(t *testing.T) {
		got, err := db.AuditHistory(ctx, store.HistoryFilter{User: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Action != "force-release" {
			t.Errorf("AuditHistory(alice) = %+v; want the force-release of her desktop and her 2 claims", got)
		}
	})
	t.Run("OpenSessions", func(t *testing.T) {
		got, err := db.OpenSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if g := ids(got); len(g) != 2 || g[0] != "c" || g[1] != "b" {
			t.Errorf("OpenSessions = %v; want [c b]", g)
		}
	})
}
