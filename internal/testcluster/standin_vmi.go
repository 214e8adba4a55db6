package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/local"
)

// TEST-ONLY: the stand-in's VirtualMachineInstances. A started VM gets a
// VMI object and a real desktop standing for its guest (local.StartDesktop:
// Xvnc, openbox, xterm and freerdp-shadow, on Unix sockets), reachable at a
// loopback IP of its own (127.77.x.y; all of 127.0.0.0/8 is loopback on
// Linux) on the guest's ports: 5900 (VNC) and 3389 (RDP), through small
// TCP-to-Unix-socket forwarders. That IP is what the VMI reports in
// status.interfaces, as a pod network address would be. A VM whose
// template asks for a virtio video device gets a real QEMU guest instead
// (standin_qemu.go).

// Where the stand-in's guests listen, as a guest's own servers would.
const (
	standInPortVNC = 5900
	standInPortRDP = 3389
)

// errCrashLoop is the boot failure of a VM made to CrashLoop.
var errCrashLoop = errors.New("the virt-launcher Pod keeps failing (CrashLoop)")

// standInBootWait bounds a guest's boot: the desktop start and its first
// VNC answer.
const standInBootWait = 30 * time.Second

// standInVMI is one running VMI: the desktop standing for its guest and
// the forwarders that put it on the guest's IP.
type standInVMI struct {
	vmUID   types.UID // the VM it runs for; a VM deleted or replaced ends it
	ip      string
	desktop *local.Desktop // the desktop standing for the guest, or nil for
	vm      *local.VM      // a real QEMU guest (standin_qemu.go)
	qmpMu   sync.Mutex     // one QMP client at a time (screendump)
	dir     string         // the guest's folder, its programs' logs among it
	lns     []net.Listener
	wg      sync.WaitGroup // forwarders and their connections
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	direct  map[net.Conn]net.Conn    // a direct connection at the guest's IP -> its pipe to the display
	silent  map[net.Conn]bool        // direct connections a migration left silent (standin_migrate.go)
	viewers map[string]chan struct{} // console -> closed to kick its one client (standin_console.go)
	kicked  int                      // clients kicked by a newer one
	counts  map[string]ConsoleCounts // per console (standin_console.go)
	upAt    time.Time                // when the guest's own servers answer (GuestBootTakes)
}

// WithoutIPs makes the VMI of VM namespace/vm, when it next starts, report
// no IP in status.interfaces (an interface without ipAddress, as with no
// guest agent on a bridge binding): the guest still listens on its IP and
// the vnc and console subresources reach it, but a portal reading the VMI
// has no address to dial directly, and portforward fails as virt-api's
// does (it dials the VMI's first IP). Call it before Start.
func (s *KubeVirtStandIn) WithoutIPs(namespace, vm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noIPs[namespace+"/"+vm] = true
}

// OnBoot has fn called with each guest that boots: its VM, its IP and the
// sign-in of its RDP server (empty without one), which a real guest's user
// would know. make run-cluster prints them.
func (s *KubeVirtStandIn) OnBoot(fn func(namespace, vm, ip, rdpUser, rdpPassword string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onBoot = fn
}

// GuestLog returns what program ("freerdp-shadow", "Xvnc") of the running
// guest of VMI namespace/name has logged, or "" with no such guest: what
// the guest's own servers say they got.
func (s *KubeVirtStandIn) GuestLog(namespace, name, program string) string {
	g := s.vmi(namespace, name)
	if g == nil {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(g.dir, program+".log"))
	return string(b)
}

// OnGuestDisplay runs the shell command cmd on the display of the running
// guest of VMI namespace/name (xdpyinfo, a pointer query) and returns its
// output: what the guest's own X server says, as a test asks a guest
// agent. It fails with no such guest.
func (s *KubeVirtStandIn) OnGuestDisplay(namespace, name, cmd string) (string, error) {
	g := s.vmi(namespace, name)
	if g == nil {
		return "", fmt.Errorf("no running guest of VMI %s/%s", namespace, name)
	}
	if g.vm != nil {
		return "", fmt.Errorf("the guest of VMI %s/%s is QEMU's, with no X display: read its display with Screendump, or run commands over its serial console", namespace, name)
	}
	c := exec.Command("sh", "-c", cmd)
	c.Env = g.desktop.Env()
	out, err := c.CombinedOutput()
	return string(out), err
}

// vmi returns the running VMI namespace/name, or nil.
func (s *KubeVirtStandIn) vmi(namespace, name string) *standInVMI {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.vmis[namespace+"/"+name]
}

// enqueue runs op for VM key after every op queued for it before, so that
// a start and a stop in quick succession happen in order, as KubeVirt's
// controller would.
func (s *KubeVirtStandIn) enqueue(key string, op func(ctx context.Context)) {
	s.mu.Lock()
	prev := s.ops[key]
	done := make(chan struct{})
	s.ops[key] = done
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			if s.ops[key] == done {
				delete(s.ops, key)
			}
			s.mu.Unlock()
			close(done)
		}()
		if prev != nil {
			<-prev
		}
		op(s.ctx)
	}()
}

// boot runs VM namespace/name as a controller would: status Starting, a
// VMI, the guest's desktop, then VMI Running with its IP and the VM
// Running once the guest's VNC server answers. A failed boot leaves the VM
// in CrashLoopBackOff with the reason in a Failure condition.
func (s *KubeVirtStandIn) boot(ctx context.Context, ns, name string) {
	if s.vmi(ns, name) != nil {
		s.setVMStatus(ctx, ns, name, kubevirtv1.VirtualMachineStatusRunning, true, "")
		return
	}
	s.setVMStatus(ctx, ns, name, kubevirtv1.VirtualMachineStatusStarting, false, "")
	err := errCrashLoop
	if !s.crashing(ns + "/" + name) {
		err = s.startVMI(ctx, ns, name)
	}
	if err != nil {
		if ctx.Err() == nil {
			s.logf("boot %s/%s: %v", ns, name, err)
			// The failed VMI goes, as KubeVirt's backoff deletes it between tries.
			s.shutdown(ctx, ns, name, false)
			s.setVMStatus(ctx, ns, name, kubevirtv1.VirtualMachineStatusCrashLoopBackOff, false, "KubeVirt stand-in: "+err.Error())
		}
		return
	}
	// QEMU runs: the VM is Running. It is ready at once unless its VMI has
	// a readinessProbe, which passes once the guest's servers answer.
	probe := s.hasReadinessProbe(ctx, ns, name)
	s.setVMStatus(ctx, ns, name, kubevirtv1.VirtualMachineStatusRunning, !probe, "")
	g := s.vmi(ns, name)
	if g == nil || !probe {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, time.Until(g.upAt)+standInBootWait)
	defer cancel()
	if err := waitRFB(wctx, "tcp", net.JoinHostPort(g.ip, strconv.Itoa(standInPortVNC))); err != nil {
		s.logf("readiness of %s/%s: %v", ns, name, err)
		return
	}
	if s.vmi(ns, name) == g {
		s.setVMStatus(ctx, ns, name, kubevirtv1.VirtualMachineStatusRunning, true, "")
	}
}

// GuestBootTakes makes the guest of VM namespace/vm take d, after QEMU is
// up (VMI and VM Running), until its own servers answer at its IP: until
// then they refuse (close) connections. The vnc and console subresources,
// QEMU's, answer at once. With a readinessProbe in the VM's template the
// VM is ready only once the guest answers, as KubeVirt reports it.
func (s *KubeVirtStandIn) GuestBootTakes(namespace, vm string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bootIn[namespace+"/"+vm] = d
}

// hasReadinessProbe reports whether VM ns/name's template has a readinessProbe.
func (s *KubeVirtStandIn) hasReadinessProbe(ctx context.Context, ns, name string) bool {
	var vm kubevirtv1.VirtualMachine
	return s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm) == nil && vm.Spec.Template != nil && vm.Spec.Template.Spec.ReadinessProbe != nil
}

// startVMI creates the VMI object, boots the guest and reports it Running.
func (s *KubeVirtStandIn) startVMI(ctx context.Context, ns, name string) error {
	var vm kubevirtv1.VirtualMachine
	if err := s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); err != nil {
		return err
	}
	if err := s.addFinalizer(ctx, &vm); err != nil {
		return fmt.Errorf("finalizer: %w", err)
	}
	yes := true
	obj := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: vm.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachine",
			Name: name, UID: vm.UID, Controller: &yes, BlockOwnerDeletion: &yes}}}}
	if vm.Spec.Template != nil {
		obj.Spec = *vm.Spec.Template.Spec.DeepCopy()
	}
	// A VMI left over from a VM of the same name that was deleted while
	// running (no garbage collector here) goes first.
	if err := s.cl.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the old VMI: %w", err)
	}
	if err := s.deleteLauncherPods(ctx, ns, name); err != nil {
		return fmt.Errorf("delete the old virt-launcher Pod: %w", err)
	}
	if err := s.cl.Create(ctx, obj); err != nil {
		return fmt.Errorf("create the VMI: %w", err)
	}
	obj.Status = kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Scheduling}
	if err := s.cl.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("VMI status: %w", err)
	}
	g, err := s.bootGuest(ctx, ns+"/"+name, name, vm.UID, wantsQEMU(vm.Spec.Template))
	if err != nil {
		return err
	}
	if err := s.createLauncherPod(ctx, obj, g.ip); err != nil {
		g.stop()
		return err
	}
	s.mu.Lock()
	s.vmis[ns+"/"+name] = g
	withoutIP := s.noIPs[ns+"/"+name]
	onBoot := s.onBoot
	s.mu.Unlock()
	if onBoot != nil {
		var user, password string
		if g.desktop != nil {
			user, password, _ = g.desktop.RDPCredentials()
		}
		onBoot(ns, name, g.ip, user, password)
	}
	iface := kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: "default", InterfaceName: "eth0", InfoSource: "domain, guest-agent"}
	if !withoutIP {
		iface.IP, iface.IPs = g.ip, []string{g.ip}
	}
	obj.Status = kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: StandInNode,
		Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{iface}}
	if err := s.cl.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("VMI status: %w", err)
	}
	return nil
}

// bootGuest starts the desktop standing for a guest, or with qemu a QEMU
// guest, on a loopback IP of its own and waits until its display answers.
func (s *KubeVirtStandIn) bootGuest(ctx context.Context, key, name string, uid types.UID, qemu bool) (*standInVMI, error) {
	vnc, rdp, err := listenGuestIP()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	upAt := time.Now().Add(s.bootIn[key])
	s.seq++
	dir := filepath.Join(s.dir, strconv.Itoa(s.seq))
	s.mu.Unlock()
	if qemu {
		return startQEMUGuest(ctx, dir, name, uid, vnc, rdp)
	}
	return startGuest(ctx, dir, name, uid, vnc, rdp, upAt)
}

// startGuest starts the desktop standing for a guest in dir, serving its
// VNC and RDP on the listeners (the guest's IP) from upAt, and waits until
// its display answers. It closes the listeners when it fails.
func startGuest(ctx context.Context, dir, name string, uid types.UID, vnc, rdp net.Listener, upAt time.Time) (*standInVMI, error) {
	ctx, cancel := context.WithTimeout(ctx, standInBootWait)
	defer cancel()
	g := &standInVMI{vmUID: uid, conns: map[net.Conn]struct{}{}, direct: map[net.Conn]net.Conn{}, silent: map[net.Conn]bool{}, viewers: map[string]chan struct{}{}, upAt: upAt}
	g.ip, g.lns, g.dir = vnc.Addr().(*net.TCPAddr).IP.String(), []net.Listener{vnc, rdp}, dir
	var err error
	g.desktop, err = local.StartDesktop(ctx, local.DesktopSpec{Name: name, Dir: dir, Home: filepath.Join(dir, "home")}, nil)
	if err != nil {
		g.stop()
		return nil, err
	}
	g.arrive(vnc, rdp)
	// QEMU's display (the same Xvnc) answers; the guest's own servers at
	// its IP from g.upAt.
	if err := waitRFB(ctx, "unix", g.desktop.VNCSocket()); err != nil {
		g.stop()
		return nil, fmt.Errorf("the guest's display: %w", err)
	}
	return g, nil
}

// stop closes the guest's IP and connections and stops its desktop.
func (g *standInVMI) stop() error {
	g.mu.Lock()
	for _, ln := range g.lns {
		ln.Close()
	}
	for c := range g.conns {
		c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
	if g.vm != nil {
		return g.vm.Stop()
	}
	if g.desktop != nil {
		return g.desktop.Stop()
	}
	return nil
}

// shutdown stops VM namespace/name's guest and deletes its VMI; with
// setStatus the VM goes Stopping, then Stopped.
func (s *KubeVirtStandIn) shutdown(ctx context.Context, ns, name string, setStatus bool) {
	if setStatus {
		s.setVMStatus(ctx, ns, name, kubevirtv1.VirtualMachineStatusStopping, false, "")
	}
	var obj kubevirtv1.VirtualMachineInstance
	if s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &obj) == nil {
		// The guest shuts down in its own time, within its grace.
		select {
		case <-ctx.Done():
		case <-time.After(s.shutdownTime(ns+"/"+name, obj.Spec.TerminationGracePeriodSeconds)):
		}
	}
	s.mu.Lock()
	g := s.vmis[ns+"/"+name]
	delete(s.vmis, ns+"/"+name)
	s.mu.Unlock()
	if g != nil {
		if err := g.stop(); err != nil {
			s.logf("stop the guest of %s/%s: %v", ns, name, err)
		}
	}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := s.cl.Delete(ctx, vmi); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		s.logf("delete VMI %s/%s: %v", ns, name, err)
	}
	if err := s.deleteLauncherPods(ctx, ns, name); err != nil && ctx.Err() == nil {
		s.logf("delete the virt-launcher Pod of %s/%s: %v", ns, name, err)
	}
	if setStatus {
		s.setVMStatus(ctx, ns, name, kubevirtv1.VirtualMachineStatusStopped, false, "")
	}
}

// setVMStatus writes the VM's printableStatus and ready flag; a failure
// message becomes a Failure condition.
func (s *KubeVirtStandIn) setVMStatus(ctx context.Context, ns, name string, st kubevirtv1.VirtualMachinePrintableStatus, ready bool, failure string) {
	status := map[string]any{"printableStatus": st, "ready": ready, "created": ready || st == kubevirtv1.VirtualMachineStatusStarting, "conditions": nil}
	if failure != "" {
		status["conditions"] = []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineFailure,
			Status: corev1.ConditionTrue, Reason: "StandInBootFailed", Message: failure}}
	}
	patch, _ := json.Marshal(map[string]any{"status": status})
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := s.cl.Status().Patch(ctx, vm, client.RawPatch(types.MergePatchType, patch)); err != nil &&
		!apierrors.IsNotFound(err) && !errors.Is(err, context.Canceled) {
		s.logf("status of VM %s/%s: %v", ns, name, err)
	}
}
