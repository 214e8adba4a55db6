package deploytest_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// portalSA is the user the portal's pods act as.
const portalSA = "system:serviceaccount:corral-vdi:corral-vdi-portal"

// TestFlowControl installs the base's FlowSchema and priority level on a
// real kube-apiserver and asks it, as the portal's ServiceAccount and as
// another one, which schema and level each request was classified into
// (API Priority and Fairness answers with their UIDs in response
// headers): the portal's requests queue on their own level, and nobody
// else's do.
func TestFlowControl(t *testing.T) {
	c := testcluster.MustStart(t)
	objs, err := deploytest.Render(filepath.Join("..", "..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	var fc []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == "FlowSchema" || u.GetKind() == "PriorityLevelConfiguration" {
			fc = append(fc, u)
		}
	}
	if len(fc) != 2 {
		t.Fatalf("deploy/ renders %d flow-control objects; want a FlowSchema and its PriorityLevelConfiguration", len(fc))
	}
	applied, err := deploytest.Apply(c.Config, fc, false)
	if err != nil {
		t.Fatal(err)
	}
	uid := map[string]string{}
	for _, u := range applied {
		uid[u.GetKind()] = string(u.GetUID())
	}
	classified := func(user string) (schema, level string) {
		t.Helper()
		cfg := c.Impersonate(user, "system:serviceaccounts", "system:authenticated")
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(context.Background(), "GET", cfg.Host+"/api/v1/namespaces/corral-vdi-desktops/pods", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close() // a 403 is classified too: APF runs before authorization
		return res.Header.Get("X-Kubernetes-PF-FlowSchema-UID"), res.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
	}
	// APF classifies as soon as its controller has read the new objects.
	var schema, level string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if schema, level = classified(portalSA); schema == uid["FlowSchema"] {
			break
		}
	}
	if schema != uid["FlowSchema"] || level != uid["PriorityLevelConfiguration"] {
		t.Errorf("the portal's request went to flow schema %q, level %q; want the base's %q, %q",
			schema, level, uid["FlowSchema"], uid["PriorityLevelConfiguration"])
	}
	other, otherLevel := classified("system:serviceaccount:corral-vdi:someone-else")
	if other == "" || other == uid["FlowSchema"] || otherLevel == uid["PriorityLevelConfiguration"] {
		t.Errorf("another ServiceAccount's request went to flow schema %q, level %q; want the cluster's own, not the portal's", other, otherLevel)
	}
}
