package kube_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestCTStartOfAnotherReplicasPod starts a member whose Pod another
// replica made a moment ago, before this replica's cache shows it: Start
// reads through to the API server and waits for that Pod to run, where it
// used to answer "still being stopped".
func TestCTStartOfAnotherReplicasPod(t *testing.T) {
	s := newCTSetup(t)
	s.configMap(t, "desk", map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeySize: "1", kube.CTKeyShell: `["/bin/sh"]`})
	gate := newWatchGate("/pods")
	defer gate.release()
	cfg := rest.CopyConfig(s.c.PortalServiceAccount(t))
	cfg.WrapTransport = gate.wrap(cfg.WrapTransport)
	a, ctx := mustCachedCluster(t, kube.Config{REST: cfg, Namespace: s.ns})

	gate.hold()
	ref := vdi.Ref{Namespace: s.ns, Name: "desk-1"}
	if err := s.back.Start(ctx, ref); err != nil {
		t.Fatalf("the other replica's Start: %v", err)
	}
	if m, err := a.Member(ctx, ref); err != nil || m.Power != vdi.PowerStopped {
		t.Fatalf("member as this replica's cache shows it: %s, %v; want stopped (its Pod watch held)", m.Power, err)
	}
	time.AfterFunc(time.Second, gate.release)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := a.Start(sctx, ref); err != nil {
		t.Fatalf("Start of a Pod this replica's cache has not seen yet: %v; want it to wait for that Pod to run", err)
	}
	if m, err := a.Member(ctx, ref); err != nil || m.Power != vdi.PowerRunning {
		t.Errorf("member after Start: %s, %v; want running", m.Power, err)
	}
}
