package testcluster_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestKubeVirtStandIn runs the stand-in on a cluster of its own, as make
// run-cluster does (no testing.TB): a started VM gets a VMI with a loopback
// IP where its desktop answers, in a launcher Pod with that IP, portforward
// failing without an IP as virt-api's does, a VM deleted while running loses its guest,
// a guest that cannot boot leaves the VM failed with the reason, and Close
// stops every guest.
func TestKubeVirtStandIn(t *testing.T) {
	ctx := context.Background()
	c := testcluster.MustStart(t)
	s, err := c.StartKubeVirtStandInErr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.StartKubeVirtStandInErr(ctx); again != s || err != nil {
		t.Errorf("second start = %p, %v; want the same stand-in %p", again, err, s)
	}
	admin := c.AdminClient(t)
	vms, err := kube.NewVMs(kube.Config{REST: c.Config, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string) error {
		t.Helper()
		testcluster.StoppedVM(t, admin, "default", name, map[string]string{vdi.LabelPool: "g"})
		return vms.Start(ctx, vdi.Ref{Namespace: "default", Name: name})
	}
	// guestIP returns the IP the VMI reports, checking that the guest's
	// VNC server answers there.
	guestIP := func(name string) string {
		t.Helper()
		var vmi kubevirtv1.VirtualMachineInstance
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &vmi); err != nil {
			t.Fatal(err)
		}
		if vmi.Status.Phase != kubevirtv1.Running || len(vmi.Status.Interfaces) != 1 || !strings.HasPrefix(vmi.Status.Interfaces[0].IP, "127.77.") {
			t.Fatalf("VMI %s: phase %q, interfaces %+v; want Running with a 127.77.x.y IP", name, vmi.Status.Phase, vmi.Status.Interfaces)
		}
		if len(vmi.OwnerReferences) != 1 || vmi.OwnerReferences[0].Name != name {
			t.Errorf("VMI %s is owned by %+v; want its VM", name, vmi.OwnerReferences)
		}
		ip := vmi.Status.Interfaces[0].IP
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "5900"), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != "RFB 003.008\n" {
			t.Fatalf("%s:5900 said %q, %v; want RFB 003.008", ip, line, err)
		}
		return ip
	}
	refuses := func(ip string) bool {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "5900"), time.Second)
		if err == nil {
			conn.Close()
		}
		return err != nil
	}
	within := func(d time.Duration, ok func() bool) bool {
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if ok() {
				return true
			}
		}
		return ok()
	}

	t.Run("DeletedWhileRunning", func(t *testing.T) {
		if err := start("g-1"); err != nil {
			t.Fatal(err)
		}
		ip := guestIP("g-1")
		vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g-1"}}
		if err := admin.Delete(ctx, vm); err != nil {
			t.Fatal(err)
		}
		vmiGone := func() bool {
			err := admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "g-1"}, &kubevirtv1.VirtualMachineInstance{})
			return apierrors.IsNotFound(err)
		}
		if !within(10*time.Second, func() bool { return vmiGone() && refuses(ip) }) {
			t.Errorf("10s after its VM was deleted: VMI gone %v, %s:5900 refuses %v; want both", vmiGone(), ip, refuses(ip))
		}
	})

	t.Run("StrictAsKubeVirt", func(t *testing.T) {
		// The VMI runs in a launcher Pod with the guest's IP; portforward
		// dials the VMI's first IP, and fails without one as virt-api does.
		s.WithoutIPs("default", "g-5")
		for _, name := range []string{"g-4", "g-5"} {
			if err := start(name); err != nil {
				t.Fatal(err)
			}
		}
		ip := guestIP("g-4")
		var vmi kubevirtv1.VirtualMachineInstance
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "g-4"}, &vmi); err != nil {
			t.Fatal(err)
		}
		var pods corev1.PodList
		if err := admin.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"kubevirt.io/created-by": string(vmi.UID)}); err != nil ||
			len(pods.Items) != 1 || pods.Items[0].Status.PodIP != ip || !metav1.IsControlledBy(&pods.Items[0], &vmi) {
			t.Errorf("launcher Pods of g-4: %d, %v; want one, controlled by the VMI, with Pod IP %s", len(pods.Items), err, ip)
		}
		for _, tt := range []struct {
			name string
			code int
			msg  string
		}{{"g-4", 0, ""}, {"g-5", http.StatusInternalServerError, "dialing VM: dial tcp :3389"}} {
			ws, res, err := portForward(t, c.Config, "default", tt.name, 3389)
			switch {
			case tt.code == 0 && err != nil:
				t.Errorf("portforward to %s: %v; want it open", tt.name, err)
			case tt.code != 0 && (res == nil || res.StatusCode != tt.code || !strings.Contains(bodyOf(res), tt.msg)):
				t.Errorf("portforward to %s (no IP): %v, %v; want %d with %q", tt.name, err, res, tt.code, tt.msg)
			}
			if ws != nil {
				ws.Close()
			}
		}
		for _, name := range []string{"g-4", "g-5"} {
			if err := vms.Stop(ctx, vdi.Ref{Namespace: "default", Name: name}); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("BootFails", func(t *testing.T) {
		path := os.Getenv("PATH")
		t.Setenv("PATH", t.TempDir()) // no Xvnc
		err := start("g-2")
		os.Setenv("PATH", path)
		if err == nil || !strings.Contains(err.Error(), "Xvnc not found") {
			t.Errorf("start of a VM whose guest cannot boot: %v; want the reason (Xvnc not found)", err)
		}
		if m, _ := vms.Member(ctx, vdi.Ref{Namespace: "default", Name: "g-2"}); m.Power != vdi.PowerFailed {
			t.Errorf("VM whose guest cannot boot is %s; want failed", m.Power)
		}
	})

	t.Run("CloneTriesAgain", func(t *testing.T) { testStandInCloneTriesAgain(t, s, admin) })

	t.Run("Close", func(t *testing.T) {
		if err := start("g-3"); err != nil {
			t.Fatal(err)
		}
		ip := guestIP("g-3")
		if n := childXvnc(t); n != 1 {
			t.Errorf("%d Xvnc children before Close; want 1 (g-3's)", n)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if !refuses(ip) {
			t.Errorf("after Close %s:5900 still answers; want the guest stopped", ip)
		}
		if n := childXvnc(t); n != 0 {
			t.Errorf("%d Xvnc children after Close; want none", n)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v; want the first result", err)
		}
	})
}

// portForward opens portforward/{port}/tcp of VMI ns/name through the
// apiserver as cfg.
func portForward(t *testing.T, cfg *rest.Config, ns, name string, port int) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	return subresource(t, cfg, ns, name, "portforward/"+strconv.Itoa(port)+"/tcp")
}

// bodyOf reads a refused handshake's body.
func bodyOf(res *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	return string(b)
}

// childXvnc counts this process's Xvnc children: the guests' displays.
func childXvnc(t *testing.T) int {
	t.Helper()
	return len(children(t, "Xvnc"))
}

// children returns the PIDs of this process's children whose command
// (its first 15 bytes, as the kernel keeps it) is comm.
func children(t *testing.T, comm string) []int {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		stat := string(b)
		i := strings.LastIndexByte(stat, ')')
		if i < 0 || !strings.HasSuffix(stat[:i], "("+comm) {
			continue
		}
		if f := strings.Fields(stat[i+1:]); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			pid, _ := strconv.Atoi(d.Name())
			pids = append(pids, pid)
		}
	}
	return pids
}
