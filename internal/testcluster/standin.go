package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubeVirtStandIn is a TEST-ONLY stand-in for KubeVirt's virt-api,
// virt-controller and virt-handler, so that the portal's production code
// path (the subresources.kubevirt.io API through the apiserver, VMIs read
// for their IPs) runs unchanged in tests. It is an aggregated API server
// registered with an APIService v1.subresources.kubevirt.io pointing at a
// Service of type ExternalName localhost. It serves:
//
//   - PUT virtualmachines/{name}/start and /stop with the 409s of
//     KubeVirt's lifecycle.go for each runStrategy (standin_lifecycle.go);
//   - start: sets the VM's runStrategy and, as
//     the controller, boots it: printableStatus Starting, a
//     VirtualMachineInstance of the same name, a real desktop standing for
//     the guest on a loopback IP of its own (see standin_vmi.go; a real
//     QEMU guest for a VM whose template asks for a virtio video device,
//     standin_qemu.go), VMI phase
//     Running with that IP in status.interfaces (unless WithoutIPs) and
//     the VM Running once QEMU's display answers; its guest's own servers
//     answer after GuestBootTakes, and a VM with a readinessProbe is ready
//     only then;
//   - stop: Stopping, the guest stopped (ShutdownTakes), the VMI
//     deleted, Stopped; a VM that ran carries the VM controller's
//     finalizer, so deleting it takes its guest's shutdown, within its
//     termination grace (standin_delete.go);
//   - VirtualMachineSnapshot and VirtualMachineClone objects, polled as a
//     controller would watch them (standin_clone.go): one snapshot locks a
//     source VM at a time, so clones of one VM queue; a clone from a
//     snapshot does not; the target VM is created from the source's spec,
//     labels and annotations (KubeVirt's defaults with no filters), with
//     the clone's patches, halted, and the clone's phase set to Succeeded;
//   - GET virtualmachineinstances/{name}/vnc, /console and
//     /portforward/{port}/tcp: websockets (subprotocol plain.kubevirt.io,
//     binary messages) to the guest's display (the same Xvnc), its serial
//     console, and a TCP port at the VMI's first reported IP (failing
//     without one, as virt-api does);
//   - GET virtualmachineinstances/{name}/vnc/screenshot: a PNG of the
//     guest's display that kicks no console (standin_screenshot.go), or
//     404 and no discovery entry as an older KubeVirt
//     (WithoutScreenshots);
//   - GET virtualmachineinstances/{name}/usbredir for a VMI with
//     clientPassthrough: a websocket to a real QEMU's usb-redir chardev
//     (standin_usbredir.go);
//   - a virt-launcher Pod per running VMI, with the guest's IP as its Pod
//     IP (standin_launcher.go): the address the pod network vouches for.
//
// Simplified: one node, no authentication of the proxied request (the
// apiserver has authorized it with RBAC already).
//
// Why it is still here beside KubeVirt's real control plane
// (StartKubeVirt) and its node stand-in (KubeVirt.StartNode, which runs
// real VMIs and serves virt-handler's consoles to the real virt-api): the
// older kube and e2e tests need what those do not play yet (usbredir,
// GuestBootTakes, CrashLoop, ShutdownTakes, SlowClones/HoldClones,
// WithoutIPs, GuestAgentReports, WithoutScreenshots), and they start in
// ~3 s where the real control plane takes ~30 s per test binary.
type KubeVirtStandIn struct {
	srv *httptest.Server
	cl  client.Client
	dir string // the guests' desktops, one folder each

	ctx  context.Context // ends with Close
	stop context.CancelFunc
	done chan struct{}  // the control loop has ended
	wg   sync.WaitGroup // queued power operations

	mu         sync.Mutex
	vmis       map[string]*standInVMI                   // ns/name -> running guest
	ops        map[string]chan struct{}                 // ns/name -> the last queued operation, closed when done
	noIPs      map[string]bool                          // ns/name -> report no IP (WithoutIPs)
	held       map[string]bool                          // namespaces whose clones wait (HoldClones)
	heldSn     map[string]bool                          // namespaces whose snapshots wait (HoldSnapshots)
	slow       map[string]cloneTimes                    // namespace -> how long snapshots and restores take (SlowClones)
	locks      map[string]string                        // ns/VM -> the snapshot or clone that snapshots it now
	finalizing map[string]bool                          // ns/VM -> its deletion is queued (standin_delete.go)
	bootIn     map[string]time.Duration                 // ns/VM -> how long its guest takes to answer (GuestBootTakes)
	jobs       map[types.UID]*cloneJob                  // snapshots and clones under way
	images     map[types.UID]*kubevirtv1.VirtualMachine // snapshot UID -> the VM as snapshotted
	crash      map[string]bool                          // ns/name -> the next boots fail (CrashLoop)
	downIn     map[string]time.Duration                 // ns/name -> how long the guest takes to shut down (ShutdownTakes)
	onBoot     func(namespace, vm, ip, rdpUser, rdpPassword string)
	noShots    bool              // an older KubeVirt: no vnc/screenshot (WithoutScreenshots)
	shots      map[string]int    // ns/name -> screenshots served (standin_screenshot.go)
	forged     map[string][]byte // ns/name -> what its screenshots answer (ForgeScreenshot)
	seq        int               // names the guests' folders

	closeOnce sync.Once
	closeErr  error
}

// Close stops the stand-in: its loops, every guest's desktop and its
// server. The VMI objects stay, like the cluster's other objects. Later
// calls return the first result.
func (s *KubeVirtStandIn) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		<-s.done
		s.wg.Wait()
		s.mu.Lock()
		vmis := s.vmis
		s.vmis = map[string]*standInVMI{}
		s.mu.Unlock()
		var errs []error
		for key, g := range vmis {
			if err := g.stop(); err != nil {
				errs = append(errs, fmt.Errorf("guest of %s: %w", key, err))
			}
		}
		s.srv.Close()
		errs = append(errs, os.RemoveAll(s.dir))
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("testcluster: close the KubeVirt stand-in: %w", err)
		}
	})
	return s.closeErr
}

// close is Close for Cluster.Stop, which has no one to tell but the log.
func (s *KubeVirtStandIn) close() {
	if err := s.Close(); err != nil {
		log.Print(err)
	}
}

// logf logs what the stand-in's controller could not do; tests see it as
// a VM that never gets where it was asked to go.
func (s *KubeVirtStandIn) logf(format string, args ...any) {
	log.Printf("testcluster: KubeVirt stand-in: "+format, args...)
}

// StartKubeVirtStandIn is StartKubeVirtStandInErr for tests: it fails tb
// when the stand-in does not come up.
func (c *Cluster) StartKubeVirtStandIn(tb testing.TB) *KubeVirtStandIn {
	tb.Helper()
	s, err := c.StartKubeVirtStandInErr(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// StartKubeVirtStandInErr installs the KubeVirt CRDs, starts the stand-in
// and registers it, once per cluster: later calls return the same
// stand-in, which stops with the cluster (or Close). Tests keep apart by
// namespace. Guests need the local desktop's programs (Xvnc, openbox,
// xterm; freerdp-shadow-cli for RDP).
func (c *Cluster) StartKubeVirtStandInErr(ctx context.Context) (*KubeVirtStandIn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.standIn != nil {
		return c.standIn, nil
	}
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{CRDs: KubeVirtCRDs()}); err != nil {
		return nil, fmt.Errorf("testcluster: install KubeVirt CRDs: %w", err)
	}
	cl, err := c.NewAdminClient()
	if err != nil {
		return nil, fmt.Errorf("testcluster: KubeVirt stand-in: %w", err)
	}
	// Short: the guests' desktops put Unix sockets in their folders.
	dir, err := os.MkdirTemp("", "kvsi")
	if err != nil {
		return nil, fmt.Errorf("testcluster: KubeVirt stand-in folder: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	s := &KubeVirtStandIn{cl: cl, dir: dir, ctx: lctx, stop: cancel, done: make(chan struct{}),
		vmis: map[string]*standInVMI{}, ops: map[string]chan struct{}{}, noIPs: map[string]bool{}, held: map[string]bool{},
		crash: map[string]bool{}, downIn: map[string]time.Duration{}, heldSn: map[string]bool{}, slow: map[string]cloneTimes{},
		locks: map[string]string{}, finalizing: map[string]bool{}, bootIn: map[string]time.Duration{}, jobs: map[types.UID]*cloneJob{}, images: map[types.UID]*kubevirtv1.VirtualMachine{},
		shots: map[string]int{}, forged: map[string][]byte{}}
	go s.loop(lctx)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /apis", s.handleGroups)
	mux.HandleFunc("GET /apis/subresources.kubevirt.io", s.handleGroup)
	mux.HandleFunc("GET /apis/subresources.kubevirt.io/v1", s.handleResources)
	mux.HandleFunc("PUT /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachines/{name}/{action}", s.handlePower)
	mux.HandleFunc("GET /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}/{console}", s.handleConsole)
	mux.HandleFunc("GET /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}/portforward/{port}/{proto}", s.handlePortForward)
	mux.HandleFunc("GET /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}/vnc/screenshot", s.handleScreenshot) // standin_screenshot.go
	mux.HandleFunc("GET /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}/usbredir", s.handleUSBRedir)         // standin_usbredir.go
	s.srv = httptest.NewUnstartedServer(mux)
	s.srv.Listener.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		os.RemoveAll(dir)
		return nil, err
	}
	s.srv.Listener = ln
	s.srv.StartTLS()
	port := ln.Addr().(*net.TCPAddr).Port
	if err := s.register(ctx, int32(port)); err != nil {
		s.Close()
		return nil, fmt.Errorf("testcluster: register the KubeVirt stand-in: %w", err)
	}
	c.standIn = s
	return s, nil
}

// register points v1.subresources.kubevirt.io at the stand-in and waits
// until the apiserver routes to it.
func (s *KubeVirtStandIn) register(ctx context.Context, port int32) error {
	return registerSubresources(ctx, s.cl, "virt-api-standin", port)
}

var standInResources = []metav1.APIResource{
	{Name: "virtualmachines/start", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachines/stop", Namespaced: true, Kind: "VirtualMachine", Verbs: metav1.Verbs{"update"}},
	{Name: "virtualmachineinstances/vnc", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/vnc/screenshot", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/console", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/portforward", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
	{Name: "virtualmachineinstances/usbredir", Namespaced: true, Kind: "VirtualMachineInstance", Verbs: metav1.Verbs{"get"}},
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
		GroupVersion: "subresources.kubevirt.io/v1", APIResources: s.resources()})
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

// loop runs VirtualMachineSnapshots and VirtualMachineClones
// (standin_clone.go) and reaps the guests of deleted VMs until ctx ends.
func (s *KubeVirtStandIn) loop(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.finalizeDeleted(ctx)
		s.reapOrphans(ctx)
		s.runSnapshots(ctx)
		s.runClones(ctx)
		s.gcDisks(ctx)
	}
}
