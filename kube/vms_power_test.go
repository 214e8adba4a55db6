package kube_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMsPowerConflicts powers VMs where KubeVirt answers 409 Conflict
// (the stand-in gives lifecycle.go's messages for each runStrategy): a
// start while the VM is still stopping waits for the stop and starts it,
// a VM in CrashLoopBackOff fails to start but stops, and starting or
// stopping a VM already there is no error.
func TestVMsPowerConflicts(t *testing.T) {
	s := newVMSetup(t)
	standIn := s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	put := func(name, action string) (int, string) {
		t.Helper()
		return putSubresource(t, s.sa, ns, name, action)
	}

	t.Run("StartWhileStopping", func(t *testing.T) {
		ref := vdi.Ref{Namespace: ns, Name: "slow-1"}
		testcluster.StoppedVM(t, admin, ns, ref.Name, map[string]string{vdi.LabelPool: "slow"})
		if err := vms.Start(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if code, msg := put(ref.Name, "start"); code != http.StatusConflict || !strings.Contains(msg, "VM is already running") {
			t.Errorf("start of a running VM: %d %s; want KubeVirt's 409 VM is already running", code, msg)
		}
		if err := vms.Start(ctx, ref); err != nil {
			t.Errorf("Start of a running VM: %v; want nil", err)
		}
		standIn.ShutdownTakes(ns, ref.Name, 2*time.Second)
		if code, msg := put(ref.Name, "stop"); code != http.StatusAccepted {
			t.Fatalf("stop: %d %s", code, msg)
		}
		if code, msg := put(ref.Name, "start"); code != http.StatusConflict || !strings.Contains(msg, "VM is already running") {
			t.Errorf("start while stopping: %d %s; want KubeVirt's 409 VM is already running", code, msg)
		}
		begin := time.Now()
		if err := vms.Start(ctx, ref); err != nil {
			t.Fatalf("Start while stopping: %v; want it started once stopped", err)
		}
		t.Logf("started after the stop in progress in %s", time.Since(begin).Round(time.Millisecond))
		if m, _ := vms.Member(ctx, ref); m.Power != vdi.PowerRunning {
			t.Errorf("after Start %s is %s; want running", ref, m.Power)
		}
		standIn.ShutdownTakes(ns, ref.Name, 0)
		if err := vms.Stop(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if code, msg := put(ref.Name, "stop"); code != http.StatusConflict || !strings.Contains(msg, "VM is not running") {
			t.Errorf("stop of a stopped VM: %d %s; want KubeVirt's 409 VM is not running", code, msg)
		}
	})

	t.Run("CrashLoop", func(t *testing.T) {
		ref := vdi.Ref{Namespace: ns, Name: "crash-1"}
		testcluster.StoppedVM(t, admin, ns, ref.Name, map[string]string{vdi.LabelPool: "crash"})
		standIn.CrashLoop(ns, ref.Name)
		err := vms.Start(ctx, ref)
		if vdi.ErrorCode(err) != vdi.EUnavailable || !strings.Contains(err.Error(), "CrashLoopBackOff") {
			t.Errorf("Start of a VM that crash-loops: %v; want EUnavailable naming CrashLoopBackOff", err)
		}
		if code, msg := put(ref.Name, "start"); code != http.StatusConflict || !strings.Contains(msg, "Always does not support manual start requests") {
			t.Errorf("start of a VM in CrashLoopBackOff: %d %s; want KubeVirt's 409 for runStrategy Always", code, msg)
		}
		if err := vms.Stop(ctx, ref); err != nil {
			t.Errorf("Stop of a VM in CrashLoopBackOff: %v; want it stopped", err)
		}
		if m, _ := vms.Member(ctx, ref); m.Power != vdi.PowerStopped {
			t.Errorf("after Stop %s is %s; want stopped", ref, m.Power)
		}
	})
}

// putSubresource PUTs virtualmachines/{name}/{action} as cfg, as virtctl
// would, and returns the status code and body.
func putSubresource(t *testing.T, cfg *rest.Config, ns, name, action string) (int, string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/apis/subresources.kubevirt.io/v1/namespaces/" + ns + "/virtualmachines/" + name + "/" + action
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, url, bytes.NewReader([]byte("{}")))
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
