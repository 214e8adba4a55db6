package kube_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestCTPoolTrouble covers what goes wrong: images that cannot run, a Pod
// deleted by hand, unknown pools and members, ConfigMaps that do not read,
// and a pool made through the portal.
func TestCTPoolTrouble(t *testing.T) {
	s := newCTSetup(t)
	ctx, ns := s.ctx, s.ns

	t.Run("ImageCannotRun", func(t *testing.T) {
		for _, c := range []struct{ image, want string }{
			{testcluster.ImagePullFails, "cannot be pulled"},
			{testcluster.ImageCrashLoop, "keeps exiting"},
		} {
			pool := strings.TrimPrefix(c.image, "corral.test/")
			s.configMap(t, pool, map[string]string{kube.CTKeyImage: c.image, kube.CTKeySize: "1"})
			ref := vdi.Ref{Namespace: ns, Name: pool + "-1"}
			err := s.back.Start(ctx, ref)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("start a member of %s: %v; want an error saying %q", c.image, err, c.want)
			}
			m, err := s.back.Member(ctx, ref)
			if err != nil || m.Power != vdi.PowerFailed || !strings.Contains(m.Reason, c.want) {
				t.Errorf("member of %s: %+v, %v; want failed, %q", c.image, m, err, c.want)
			}
		}
	})

	t.Run("PodDeletedByHand", func(t *testing.T) {
		s.configMap(t, "hand", map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeySize: "1", kube.CTKeyMode: "persistent"})
		ref := vdi.Ref{Namespace: ns, Name: "hand-1"}
		if err := s.back.Start(ctx, ref); err != nil {
			t.Fatal(err)
		}
		old := s.pod(t, ref.Name)
		zero := int64(0)
		if err := s.c.Client.CoreV1().Pods(ns).Delete(ctx, ref.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		if m, err := s.back.Member(ctx, ref); err != nil || m.Power != vdi.PowerStopped {
			t.Errorf("member whose Pod was deleted: %+v, %v; want stopped", m, err)
		}
		if err := s.back.Start(ctx, ref); err != nil {
			t.Fatalf("start again: %v", err)
		}
		if pod := s.pod(t, ref.Name); pod == nil || pod.UID == old.UID {
			t.Errorf("Pod after Start: %v; want a new one", pod)
		}
		if err := s.back.Stop(ctx, ref); err != nil || s.pod(t, ref.Name) != nil {
			t.Errorf("stop: %v; want the Pod gone", err)
		}
		// Persistent: a claim starts the member, its release stops it.
		d, err := s.svc.Claim(ctx, vdi.Identity{Login: "bob"}, ns, "hand")
		if err != nil || d.Power != vdi.PowerRunning {
			t.Fatalf("bob's claim: %+v, %v; want a running desktop", d, err)
		}
		if err := s.svc.Release(ctx, vdi.Identity{Login: "bob"}, d.Ref(), ""); err != nil {
			t.Fatalf("bob's release: %v", err)
		}
		waitClaimGone(t, s.leases, d.Ref()) // the release answers while the Pod goes
		if m, err := s.back.Member(ctx, ref); err != nil || m.Power != vdi.PowerStopped || s.pod(t, ref.Name) != nil {
			t.Errorf("persistent member after its release: %+v, %v; want stopped, no Pod", m, err)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		if _, err := s.back.Pool(ctx, ns, "nope"); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("unknown pool: %v; want ENotFound", err)
		}
		if _, err := s.back.Members(ctx, ns, "nope"); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("members of an unknown pool: %v; want ENotFound", err)
		}
		if err := s.back.Start(ctx, vdi.Ref{Namespace: ns, Name: "nope-1"}); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("start an unknown member: %v; want ENotFound", err)
		}
		if err := s.svc.UpdatePool(ctx, s.root, ns, "nope", vdi.PoolUpdate{Policy: &vdi.Policy{}}); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("policy of an unknown pool: %v; want ENotFound", err)
		}
		if _, err := s.exec.Dial(ctx, vdi.Ref{Namespace: ns, Name: "nope-1"}, vdi.ProtocolTerminal); err == nil {
			t.Error("exec into a member with no Pod succeeded")
		}
	})

	t.Run("BadConfigMap", func(t *testing.T) {
		for key, val := range map[string]string{kube.CTKeySize: "three", kube.CTKeyShell: "bash -l", kube.CTKeyPolicy: `{"idleTimeout": "soon"}`,
			kube.CTKeyMode: "forever", kube.CTKeyTerminalPort: "99999", kube.CTKeyImage: "", kube.CTKeyMembers: "x-1,x-2", kube.CTKeyRunAsUser: "0"} {
			pool := "bad-" + strings.ToLower(key)
			data := map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeySize: "1"}
			data[key] = val
			s.configMap(t, pool, data)
			_, err := s.back.Pool(ctx, ns, pool)
			var e *vdi.Error
			if !errors.As(err, &e) || e.Code != vdi.EInvalid || !strings.Contains(e.Msg, key) || !strings.Contains(e.Hint, "kubectl edit configmap") {
				t.Errorf("pool with %s %q: %v; want EInvalid naming %s with a hint", key, val, err, key)
			}
		}
	})

	t.Run("CreateThroughPortal", func(t *testing.T) {
		p := vdi.Pool{Namespace: ns, Name: "made", Kind: vdi.KindCT, Mode: vdi.ModeEphemeral, Source: "corral.test/shell", Size: 2,
			Policy: vdi.Policy{IdleTimeout: 30 * time.Minute}}
		if err := s.svc.CreatePool(ctx, s.root, p); err != nil {
			t.Fatalf("create: %v", err)
		}
		if err := s.svc.CreatePool(ctx, s.root, p); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("creating it again: %v; want EConflict", err)
		}
		got, err := s.back.Pool(ctx, ns, "made")
		if err != nil || got.Size != 2 || got.Policy.IdleTimeout != 30*time.Minute {
			t.Fatalf("pool made through the portal: %+v, %v", got, err)
		}
		cm, err := s.c.Client.CoreV1().ConfigMaps(ns).Get(ctx, kube.CTConfigMapName("made"), metav1.GetOptions{})
		if err != nil || cm.Data[kube.CTKeyImage] != "corral.test/shell" || cm.Data[kube.CTKeySize] != "2" || cm.Data[kube.CTKeyMembers] != "" {
			t.Errorf("ConfigMap of a pool made through the portal: %v, %v; want image and size, no member list", cm.Data, err)
		}
		if s.pod(t, "made-1") == nil || s.pod(t, "made-2") == nil {
			t.Error("an ephemeral pool made through the portal has no warm Pods")
		}
		pol := vdi.Policy{MaxSession: 8 * time.Hour}
		if err := s.svc.UpdatePool(ctx, s.root, ns, "made", vdi.PoolUpdate{Policy: &pol}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.back.Pool(ctx, ns, "made"); got.Policy != pol {
			t.Errorf("policy after update: %+v; want %+v", got.Policy, pol)
		}
	})
}

// TestCTDirectTerminal reaches a member's terminal directly when its pool
// declares a terminalPort: TCP to the Pod's IP on that port, which the
// test serves as the container would.
func TestCTDirectTerminal(t *testing.T) {
	s := newCTSetup(t)
	ctx, ns := s.ctx, s.ns
	s.configMap(t, "tty", map[string]string{kube.CTKeyImage: "corral.test/ttyd", kube.CTKeySize: "1", kube.CTKeyTerminalPort: "7681"})
	d, err := s.svc.Claim(ctx, vdi.Identity{Login: "alice"}, ns, "tty")
	if err != nil {
		t.Fatal(err)
	}
	pod := s.pod(t, d.Name)
	if len(pod.Spec.Containers[0].Ports) != 1 || pod.Spec.Containers[0].Ports[0].ContainerPort != 7681 {
		t.Errorf("container ports %+v; want the terminal port 7681", pod.Spec.Containers[0].Ports)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(pod.Status.PodIP, "7681"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("container terminal\r\n"))
			c.Close()
		}
	}()
	conn, err := s.svc.Dial(ctx, d.Ref(), vdi.ProtocolTerminal)
	if err != nil {
		t.Fatalf("direct terminal: %v", err)
	}
	defer conn.Close()
	expect(t, conn, "container terminal")
	if _, err := s.svc.Dial(ctx, d.Ref(), vdi.ProtocolVNC); err == nil {
		t.Error("a container gave a VNC console")
	}
}
