package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubeVirtStandIn is a TEST-ONLY stand-in for KubeVirt's virt-api and
// virt-controller, so that the portal's production code path (the
// subresources.kubevirt.io API through the apiserver) runs unchanged in
// tests. It is an aggregated API server registered with an APIService
// v1.subresources.kubevirt.io pointing at a Service of type ExternalName
// localhost. So far it serves:
//
//   - PUT virtualmachines/{name}/start and /stop: sets the VM's
//     runStrategy and, acting as the controller at once, its
//     printableStatus (Running / Stopped) and ready flag;
//   - VirtualMachineClone objects (clone.kubevirt.io): polled as a
//     controller would watch them; the target VM is created from the
//     source VM's spec, labels and annotations (KubeVirt's defaults with no
//     filters), halted, and the clone's phase set to Succeeded;
//   - GET virtualmachineinstances/{name}/vnc and /console: a websocket
//     (subprotocol plain.kubevirt.io, binary messages) piped to the TCP
//     address the test gave SetConsole, e.g. a real Xvnc or QEMU serial.
//
// Simplified: no VMI objects, no authentication of the proxied request
// (the apiserver has authorized it with RBAC already).
type KubeVirtStandIn struct {
	srv *httptest.Server
	cl  client.Client

	mu       sync.Mutex
	consoles map[string]string // ns/vmi/vnc|console -> TCP address behind it
	stop     context.CancelFunc
	done     chan struct{}
}

// close stops the clone controller and the server.
func (s *KubeVirtStandIn) close() {
	s.stop()
	<-s.done
	s.srv.Close()
}

// StartKubeVirtStandIn installs the KubeVirt CRDs, starts the stand-in and
// registers it, once per cluster: later calls return the same stand-in,
// which stops with the cluster. Tests keep apart by namespace.
func (c *Cluster) StartKubeVirtStandIn(tb testing.TB) *KubeVirtStandIn {
	tb.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.standIn != nil {
		return c.standIn
	}
	c.InstallKubeVirt(tb)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kubevirtv1.AddToScheme, clonev1beta1.AddToScheme, corev1.AddToScheme, apiregistrationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			tb.Fatal(err)
		}
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &KubeVirtStandIn{cl: cl, consoles: map[string]string{}, stop: cancel, done: make(chan struct{})}
	go s.cloneLoop(ctx)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis", s.handleGroups)
	mux.HandleFunc("GET /apis/subresources.kubevirt.io", s.handleGroup)
	mux.HandleFunc("GET /apis/subresources.kubevirt.io/v1", s.handleResources)
	mux.HandleFunc("PUT /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachines/{name}/{action}", s.handlePower)
	mux.HandleFunc("GET /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}/{console}", s.handleConsole)
	s.srv = httptest.NewUnstartedServer(mux)
	s.srv.Listener.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.srv.Listener = ln
	s.srv.StartTLS()
	port := ln.Addr().(*net.TCPAddr).Port
	if err := s.register(context.Background(), int32(port)); err != nil {
		s.close()
		tb.Fatalf("testcluster: register the KubeVirt stand-in: %v", err)
	}
	c.standIn = s
	return s
}

// register points v1.subresources.kubevirt.io at the stand-in and waits
// until the apiserver routes to it.
func (s *KubeVirtStandIn) register(ctx context.Context, port int32) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}}
	if err := s.cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt", Name: "virt-api-standin"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(port)}}}}
	if err := s.cl.Create(ctx, svc); err != nil {
		return err
	}
	apisvc := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.subresources.kubevirt.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "subresources.kubevirt.io", Version: "v1",
			Service:               &apiregistrationv1.ServiceReference{Namespace: "kubevirt", Name: "virt-api-standin", Port: &port},
			InsecureSkipTLSVerify: true, GroupPriorityMinimum: 1000, VersionPriority: 15}}
	if err := s.cl.Create(ctx, apisvc); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got apiregistrationv1.APIService
		err := s.cl.Get(ctx, client.ObjectKey{Name: apisvc.Name}, &got)
		if err == nil {
			for _, c := range got.Status.Conditions {
				if c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("APIService %s not available after 30s: %+v, %v", apisvc.Name, got.Status.Conditions, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var standInResources = []metav1.APIResource{
	{Name: "virtualmachines/start", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/stop", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/vnc", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/console", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
}

// SetConsole puts the TCP address addr behind the VMI's vnc or console
// subresource.
func (s *KubeVirtStandIn) SetConsole(namespace, vmi, console, addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consoles[namespace+"/"+vmi+"/"+console] = addr
}

var upgrader = websocket.Upgrader{Subprotocols: []string{"plain.kubevirt.io"}, CheckOrigin: func(*http.Request) bool { return true }}

// handleConsole is GET .../virtualmachineinstances/{name}/vnc|console.
func (s *KubeVirtStandIn) handleConsole(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	addr := s.consoles[r.PathValue("ns")+"/"+r.PathValue("name")+"/"+r.PathValue("console")]
	s.mu.Unlock()
	if addr == "" {
		writeStatus(w, http.StatusNotFound, "no "+r.PathValue("console")+" for virtualmachineinstance "+r.PathValue("ns")+"/"+r.PathValue("name"))
		return
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer conn.Close()
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	go func() {
		defer conn.Close()
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if typ != websocket.BinaryMessage {
				continue // KubeVirt ignores text frames too
			}
			if _, err := conn.Write(msg); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *KubeVirtStandIn) handleGroups(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups: []metav1.APIGroup{standInGroup()}})
}

func (s *KubeVirtStandIn) handleGroup(w http.ResponseWriter, r *http.Request) {
	g := standInGroup()
	g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
	writeJSON(w, http.StatusOK, &g)
}

func standInGroup() metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: "subresources.kubevirt.io/v1", Version: "v1"}
	return metav1.APIGroup{Name: "subresources.kubevirt.io", Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

func (s *KubeVirtStandIn) handleResources(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: "subresources.kubevirt.io/v1", APIResources: standInResources})
}

// handlePower is PUT .../virtualmachines/{name}/start|stop.
func (s *KubeVirtStandIn) handlePower(w http.ResponseWriter, r *http.Request) {
	ns, name, action := r.PathValue("ns"), r.PathValue("name"), r.PathValue("action")
	strategy, status, ready := kubevirtv1.RunStrategyAlways, kubevirtv1.VirtualMachineStatusRunning, true
	switch action {
	case "start":
	case "stop":
		strategy, status, ready = kubevirtv1.RunStrategyHalted, kubevirtv1.VirtualMachineStatusStopped, false
	default:
		writeStatus(w, http.StatusNotFound, "the stand-in does not serve virtualmachines/"+action)
		return
	}
	ctx := r.Context()
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	spec, _ := json.Marshal(map[string]any{"spec": map[string]any{"runStrategy": strategy, "running": nil}})
	if err := s.cl.Patch(ctx, vm, client.RawPatch(types.MergePatchType, spec)); apierrors.IsNotFound(err) {
		writeStatus(w, http.StatusNotFound, "virtualmachine "+ns+"/"+name+" not found")
		return
	} else if err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	st, _ := json.Marshal(map[string]any{"status": map[string]any{"printableStatus": status, "ready": ready, "created": ready}})
	if err := s.cl.Status().Patch(ctx, vm, client.RawPatch(types.MergePatchType, st)); err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, code int, msg string) {
	reason := metav1.StatusReasonInternalError
	if code == http.StatusNotFound {
		reason = metav1.StatusReasonNotFound
	}
	writeJSON(w, code, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg})
}

// cloneLoop executes VirtualMachineClones until ctx ends.
func (s *KubeVirtStandIn) cloneLoop(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var list clonev1beta1.VirtualMachineCloneList
		if err := s.cl.List(ctx, &list); err != nil {
			continue
		}
		for i := range list.Items {
			if c := &list.Items[i]; c.Status.Phase == clonev1beta1.PhaseUnset {
				if err := s.executeClone(ctx, c); err != nil && ctx.Err() == nil {
					log.Printf("testcluster: KubeVirt stand-in: clone %s/%s: %v", c.Namespace, c.Name, err)
				}
			}
		}
	}
}

// executeClone makes c's target VM from its source VM and marks c done.
func (s *KubeVirtStandIn) executeClone(ctx context.Context, c *clonev1beta1.VirtualMachineClone) error {
	phase := clonev1beta1.Succeeded
	var src kubevirtv1.VirtualMachine
	err := s.cl.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Source.Name}, &src)
	if err == nil {
		halted := kubevirtv1.RunStrategyHalted
		vm := &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Spec.Target.Name, Labels: src.Labels, Annotations: src.Annotations},
			Spec:       *src.Spec.DeepCopy(),
		}
		vm.Spec.RunStrategy, vm.Spec.Running = &halted, nil
		if err = s.cl.Create(ctx, vm); err == nil {
			vm.Status = kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusStopped}
			err = s.cl.Status().Update(ctx, vm)
		}
	}
	if err != nil {
		phase = clonev1beta1.Failed
	}
	st, _ := json.Marshal(map[string]any{"status": map[string]any{"phase": phase}})
	if perr := s.cl.Status().Patch(ctx, c, client.RawPatch(types.MergePatchType, st)); perr != nil && err == nil {
		err = perr
	}
	return err
}
