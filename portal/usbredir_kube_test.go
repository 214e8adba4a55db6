package portal

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/cli"
	"github.com/corral-dev/corral-vdi-portal/handlers"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// fakeVirtctlEnv makes the test binary act as virtctl: it writes its
// arguments to the file the variable names and exits.
const fakeVirtctlEnv = "CORRAL_FAKE_VIRTCTL_ARGS"

func init() {
	if out := os.Getenv(fakeVirtctlEnv); out != "" {
		os.WriteFile(out, []byte(strings.Join(os.Args[1:], " ")), 0o644)
		os.Exit(0)
	}
}

// TestUSBRedir_Kube attaches through /ws/usbredir to KubeVirt VMs of the
// stand-in, as the portal's ServiceAccount: the VMI's usbredir
// subresource (a real QEMU usb-redir chardev behind the stand-in) answers
// the handshake; a VM without clientPassthrough is refused with the fix.
// The admin path runs a fake virtctl that records its arguments.
func TestUSBRedir_Kube(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)
	c.StartKubeVirtStandIn(t)
	c.Apply(t, "../deploy/rbac.yaml")
	ns := c.Namespace(t)
	admin := c.AdminClient(t)
	for _, name := range []string{"usb-1", "plain-1"} {
		vm := testcluster.StoppedVM(t, admin, ns, name, map[string]string{vdi.LabelPool: strings.TrimSuffix(name, "-1")})
		if name == "usb-1" {
			if err := testcluster.Update(ctx, admin, vm, func(vm *kubevirtv1.VirtualMachine) {
				vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{ClientPassthrough: &kubevirtv1.ClientPassthroughDevices{}}}}}
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	m := startKubePortal(t, testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t)), ns)
	env := map[string]string{"CORRAL_VDI_ADMIN_SOCKET": m.Config.Server.AdminSocket}
	run := func(args ...string) (string, error) {
		return runCLITest(t, func(k string) string { return env[k] }, args...)
	}
	for _, pool := range []string{"usb", "plain"} {
		if out, err := run("assign", ns+"/"+pool, "alice"); err != nil || !strings.Contains(out, "to alice") {
			t.Fatalf("assign %s/%s alice: %q, %v", ns, pool, out, err)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
		out, _ := run("pool", "list")
		if f := row(out, ns+"/usb-1"); len(f) >= 4 && f[3] == "running" {
			if f := row(out, ns+"/plain-1"); len(f) >= 4 && f[3] == "running" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("VMs never ran:\n%s", out)
		}
	}
	token := func(name string) http.Header {
		return http.Header{"Authorization": {"Bearer " + handlers.USBToken("alice", vdi.Ref{Namespace: ns, Name: name})}}
	}

	t.Run("SubresourceReceivesTheStream", func(t *testing.T) {
		ws, _, err := dialUSB(m.URL(), ns+"/usb-1", token("usb-1"))
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if v := mustHandshake(t, ws); !strings.HasPrefix(v, "qemu usb-redir guest") {
			t.Fatalf("guest hello %q; want the stand-in's QEMU", v)
		}
	})
	t.Run("NoClientPassthrough", func(t *testing.T) {
		mustRefuse(t, m.URL(), ns+"/plain-1", token("plain-1"), http.StatusBadRequest, "clientPassthrough")
	})
	t.Run("TokenOfAnotherDesktop", func(t *testing.T) {
		mustRefuse(t, m.URL(), ns+"/usb-1", token("plain-1"), http.StatusUnauthorized, "not valid")
	})

	t.Run("AdminPathRunsVirtctl", func(t *testing.T) {
		args := t.TempDir() + "/args"
		mustFakeOnPath(t, "virtctl", fakeVirtctlEnv, args)
		if _, err := run("usb", "redir", ns+"/usb-1", "--device", "1050:0407", "--user", "alice", "--yes"); err != nil {
			t.Fatalf("usb redir --user alice: %v", err)
		}
		got, err := os.ReadFile(args)
		if want := fmt.Sprintf("usbredir 1050:0407 usb-1 -n %s", ns); err != nil || string(got) != want {
			t.Fatalf("virtctl ran with %q, %v; want %q", got, err, want)
		}
		if _, err := run("usb", "redir", ns+"/usb-1", "--device", "1050:0407", "--user", "bob", "--yes"); cli.ExitCode(err) != cli.ExitConflict || !strings.Contains(err.Error(), "held by alice, not bob") {
			t.Fatalf("usb redir --user bob: %v; want refused, alice holds it", err)
		}
		if _, err := run("usb", "redir", ns+"/usb-1", "--device", "1050:0407", "--user", "alice"); cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "--yes") {
			t.Fatalf("usb redir without --yes and nobody to ask: %v", err)
		}
		t.Setenv("PATH", t.TempDir())
		if _, err := run("usb", "redir", ns+"/usb-1", "--device", "1050:0407", "--user", "alice", "--yes"); cli.ExitCode(err) != cli.ExitRefused || !strings.Contains(err.Error(), "github.com/kubevirt/kubevirt/releases") {
			t.Fatalf("usb redir without virtctl: %v; want the install hint", err)
		}
	})
}
