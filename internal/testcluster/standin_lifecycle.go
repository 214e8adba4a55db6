package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TEST-ONLY: the stand-in's start and stop, strict where KubeVirt's
// virt-api (pkg/virt-api/rest/lifecycle.go) is: the same 409 Conflict
// messages for each runStrategy, and the runStrategy changed by a JSON
// patch that tests the value it read, so that a VM changed meanwhile gets
// a 409 too.

// Messages of KubeVirt's 409s.
const (
	msgAlreadyRunning = "VM is already running"
	msgNotRunning     = "VM is not running"
	msgJSONPatchTest  = "jsonpatch test operation does not apply"
)

// CrashLoop makes the boots of VM namespace/vm fail from now on: the VM
// goes CrashLoopBackOff with no VMI, as KubeVirt shows a guest whose
// virt-launcher keeps failing.
func (s *KubeVirtStandIn) CrashLoop(namespace, vm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.crash[namespace+"/"+vm] = true
}

// ShutdownTakes makes the guest of VM namespace/vm take d to shut down
// after a stop or a deletion (at most its VMI's termination grace, after
// which KubeVirt kills it). The VMI stays, and the VM is Stopping, until then.
func (s *KubeVirtStandIn) ShutdownTakes(namespace, vm string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.downIn[namespace+"/"+vm] = d
}

func (s *KubeVirtStandIn) crashing(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.crash[key]
}

// shutdownTime is how long the guest of key takes to go down, capped by
// the grace its VMI has.
func (s *KubeVirtStandIn) shutdownTime(key string, grace *int64) time.Duration {
	s.mu.Lock()
	d := s.downIn[key]
	s.mu.Unlock()
	g := 30 * time.Second // KubeVirt's default terminationGracePeriodSeconds
	if grace != nil {
		g = time.Duration(*grace) * time.Second
	}
	return min(d, g)
}

// runStrategy is vm's run strategy as KubeVirt reads it.
func runStrategy(vm *kubevirtv1.VirtualMachine) kubevirtv1.VirtualMachineRunStrategy {
	switch {
	case vm.Spec.RunStrategy != nil:
		return *vm.Spec.RunStrategy
	case vm.Spec.Running != nil && *vm.Spec.Running:
		return kubevirtv1.RunStrategyAlways
	}
	return kubevirtv1.RunStrategyHalted
}

// writeConflict answers 409 as apierrors.NewConflict does for KubeVirt.
func writeConflict(w http.ResponseWriter, name, msg string) {
	err := apierrors.NewConflict(kubevirtv1.Resource("virtualmachine"), name, fmt.Errorf("%s", msg))
	writeJSON(w, http.StatusConflict, &err.ErrStatus)
}

// handlePower is PUT .../virtualmachines/{name}/start|stop. It answers
// once the runStrategy is set; the VM gets there afterwards, as in KubeVirt.
func (s *KubeVirtStandIn) handlePower(w http.ResponseWriter, r *http.Request) {
	ctx, ns, name, action := r.Context(), r.PathValue("ns"), r.PathValue("name"), r.PathValue("action")
	if action != "start" && action != "stop" {
		writeStatus(w, http.StatusNotFound, "the stand-in does not serve virtualmachines/"+action)
		return
	}
	var vm kubevirtv1.VirtualMachine
	if err := s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); apierrors.IsNotFound(err) {
		writeStatus(w, http.StatusNotFound, "virtualmachine "+ns+"/"+name+" not found")
		return
	} else if err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	var vmi kubevirtv1.VirtualMachineInstance
	err := s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vmi)
	if err != nil && !apierrors.IsNotFound(err) {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	hasVMI := err == nil
	final := vmi.Status.Phase == kubevirtv1.Succeeded || vmi.Status.Phase == kubevirtv1.Failed
	rs := runStrategy(&vm)
	key := ns + "/" + name
	switch action {
	case "start":
		if hasVMI && !final && vmi.Status.Phase != kubevirtv1.Unknown && vmi.Status.Phase != kubevirtv1.VmPhaseUnset {
			writeConflict(w, name, msgAlreadyRunning)
			return
		}
		switch rs {
		case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyOnce:
			writeConflict(w, name, fmt.Sprintf("%v does not support manual start requests", rs))
			return
		case kubevirtv1.RunStrategyHalted:
			if !s.patchRunStrategy(w, &vm, kubevirtv1.RunStrategyAlways) {
				return
			}
		}
		s.enqueue(key, func(ctx context.Context) { s.boot(ctx, ns, name) })
	case "stop":
		switch rs {
		case kubevirtv1.RunStrategyHalted:
			if !hasVMI || final {
				writeConflict(w, name, msgNotRunning)
			} else {
				writeConflict(w, name, fmt.Sprintf("%v only supports manual stop requests with a shorter graceperiod", rs))
			}
			return
		case kubevirtv1.RunStrategyManual, kubevirtv1.RunStrategyRerunOnFailure:
			if !hasVMI || final {
				writeConflict(w, name, msgNotRunning)
				return
			}
		default:
			if !s.patchRunStrategy(w, &vm, kubevirtv1.RunStrategyHalted) {
				return
			}
		}
		s.enqueue(key, func(ctx context.Context) { s.shutdown(ctx, ns, name, true) })
	}
	w.WriteHeader(http.StatusAccepted)
}

// patchRunStrategy sets vm's runStrategy to rs with a JSON patch that
// tests what was read, as virt-api's getRunningPatch does; it answers the
// request and reports false when that fails.
func (s *KubeVirtStandIn) patchRunStrategy(w http.ResponseWriter, vm *kubevirtv1.VirtualMachine, rs kubevirtv1.VirtualMachineRunStrategy) bool {
	var ops []map[string]any
	if vm.Spec.RunStrategy != nil {
		ops = append(ops, map[string]any{"op": "test", "path": "/spec/runStrategy", "value": *vm.Spec.RunStrategy},
			map[string]any{"op": "replace", "path": "/spec/runStrategy", "value": rs})
	} else {
		if vm.Spec.Running != nil {
			ops = append(ops, map[string]any{"op": "test", "path": "/spec/running", "value": *vm.Spec.Running},
				map[string]any{"op": "remove", "path": "/spec/running"})
		}
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/runStrategy", "value": rs})
	}
	patch, _ := json.Marshal(ops)
	err := s.cl.Patch(context.WithoutCancel(s.ctx), vm, client.RawPatch(types.JSONPatchType, patch))
	switch {
	case err == nil:
		return true
	case strings.Contains(err.Error(), "test operation") || strings.Contains(err.Error(), "testing value"):
		writeConflict(w, vm.Name, msgJSONPatchTest+": "+err.Error())
	default:
		writeStatus(w, http.StatusInternalServerError, err.Error())
	}
	return false
}
