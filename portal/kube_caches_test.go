package portal

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
)

// TestKubeCachesNotice: a cache that cannot fill (the portal may not list
// in its namespace) is no outage but shows: the pages' notice (and so
// /readyz's "degraded") says the caches are catching up, without the
// refusal's text, which goes to the log.
func TestKubeCachesNotice(t *testing.T) {
	c := testcluster.MustStart(t)
	ns := c.Namespace(t)
	back, err := kube.NewCluster(kube.Config{REST: c.User(t, "nobody"), Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	back.FillWait = time.Second
	var log strings.Builder
	var k kubeCaches
	if n := k.notice(); n != "" {
		t.Errorf("notice with no caches: %q; want none", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k.start(ctx, back, slog.New(slog.NewTextHandler(&log, nil)))
	n := k.notice()
	if !strings.Contains(n, "caches are catching up") || strings.Contains(n, "forbidden") {
		t.Errorf("notice with a cache refused: %q; want it catching up, without the refusal", n)
	}
	if !strings.Contains(log.String(), "forbidden") {
		t.Errorf("log with a cache refused: %q; want the refusal", log.String())
	}
}
