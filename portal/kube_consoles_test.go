package portal

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestKubeConsolePaths runs the portal on the kube backend against VMs
// with real desktops (the KubeVirt stand-in): a VM whose VMI reports its IP
// is reached directly, for VNC and for RDP (its probe and the RDCleanPath
// gateway); one whose VMI reports none through the apiserver path the kube
// backend adds, for VNC only: virt-api's portforward dials the VMI's IP, so
// RDP is not offered without one. Each session records its path.
func TestKubeConsolePaths(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)
	standIn := c.StartKubeVirtStandIn(t)
	c.Apply(t, "../deploy/rbac.yaml")
	ns := c.Namespace(t)
	admin := c.AdminClient(t)
	standIn.WithoutIPs(ns, "far-1")
	for _, name := range []string{"near-1", "far-1"} {
		testcluster.StoppedVM(t, admin, ns, name, map[string]string{vdi.LabelPool: strings.TrimSuffix(name, "-1")})
	}
	m := startKubePortal(t, testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t)), ns)
	base := m.URL()
	// The replica signs in people in dev mode: a form, then a cookie.
	jar, _ := cookiejar.New(nil)
	alice := &http.Client{Jar: jar}
	if res, err := alice.PostForm(base+"/signin", url.Values{"login": {"alice"}}); err != nil {
		t.Fatal(err)
	} else {
		res.Body.Close()
	}
	call := func(method, path string, out any) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		res, err := alice.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusNoContent {
			t.Fatalf("%s %s: %s %s", method, path, res.Status, b)
		}
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %v in %s", method, path, err, b)
			}
		}
	}

	for _, tt := range []struct {
		member, path string
		rdp          bool
	}{{"near-1", "direct", true}, {"far-1", "apiserver", false}} {
		t.Run(tt.member, func(t *testing.T) {
			ref := ns + "/" + tt.member
			begin := time.Now()
			var d vdi.Desktop
			call("POST", "/api/vdi/pools/"+ns+"/"+strings.TrimSuffix(tt.member, "-1")+"/claim", &d)
			t.Logf("claim (the VM starts, its desktop answers) in %s", time.Since(begin).Round(time.Millisecond))
			if d.Name != tt.member || (d.Power != vdi.PowerRunning && d.Power != vdi.PowerStarting) {
				t.Fatalf("claimed %s, %s; want %s running or starting", d.Name, d.Power, tt.member)
			}
			// The claim answers once the VM was asked to start; it runs soon after.
			for deadline := time.Now().Add(2 * time.Minute); d.Power != vdi.PowerRunning; time.Sleep(200 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s is %s two minutes after its claim; want running", tt.member, d.Power)
				}
				call("GET", "/api/vdi/desktops/"+ref, &d)
			}

			begin = time.Now()
			var a struct {
				Protocol    string `json:"protocol"`
				Token       string `json:"token"`
				Destination string `json:"destination"`
				Fallbacks   []struct {
					Protocol string `json:"protocol"`
				} `json:"fallbacks"`
			}
			call("GET", "/api/vdi/desktops/"+ref+"/connect", &a)
			t.Logf("connect (RDP probe) in %s", time.Since(begin).Round(time.Millisecond))
			switch {
			case tt.rdp && (a.Protocol != "rdp" || len(a.Fallbacks) != 2 || a.Fallbacks[0].Protocol != "vnc" || a.Fallbacks[1].Protocol != "serial"):
				t.Fatalf("connect = %+v; want rdp, then vnc and serial", a)
			case !tt.rdp && (a.Protocol != "vnc" || len(a.Fallbacks) != 1 || a.Fallbacks[0].Protocol != "serial"):
				t.Fatalf("connect = %+v; want vnc, then serial (no RDP without an IP)", a)
			}

			dialer := websocket.Dialer{Jar: jar}
			wsBase := "ws" + strings.TrimPrefix(base, "http")
			vnc, _, err := dialer.Dial(wsBase+"/ws/vnc/"+ref, nil)
			if err != nil {
				t.Fatal(err)
			}
			vnc.SetReadDeadline(time.Now().Add(15 * time.Second))
			if _, b, err := vnc.ReadMessage(); err != nil || !strings.HasPrefix(string(b), "RFB 003.008") {
				t.Errorf("VNC websocket said %q, %v; want the RFB greeting", b, err)
			}
			// The holder's second tab takes the display over, on either
			// path (KubeVirt keeps one VNC client per VMI); the first tab's
			// console ends.
			vnc2, _, err := dialer.Dial(wsBase+"/ws/vnc/"+ref, nil)
			if err != nil {
				t.Fatal(err)
			}
			vnc2.SetReadDeadline(time.Now().Add(15 * time.Second))
			if _, b, err := vnc2.ReadMessage(); err != nil || !strings.HasPrefix(string(b), "RFB 003.008") {
				t.Errorf("second tab's VNC websocket said %q, %v; want the RFB greeting", b, err)
			}
			for {
				if _, _, err := vnc.ReadMessage(); err != nil {
					var nerr net.Error
					if errors.As(err, &nerr) && nerr.Timeout() {
						t.Errorf("the first tab's VNC websocket after the second opened: %v; want it closed", err)
					}
					break
				}
			}
			vnc.Close()
			vnc2.Close()
			sessions := 2
			if tt.rdp {
				sessions++
				mustRDCleanPath(t, dialer, wsBase+"/ws/rdp/"+ref, a.Destination, a.Token)
			}

			var got []vdi.Session
			waitFor(t, 5*time.Second, "the sessions closed", func() bool {
				all, _ := m.db.Sessions(ctx, 100)
				got = got[:0]
				for _, s := range all {
					if s.Member == tt.member && !s.ClosedAt.IsZero() {
						got = append(got, s)
					}
				}
				return len(got) == sessions
			})
			for _, s := range got {
				if s.Path != tt.path {
					t.Errorf("%s session of %s took path %q; want %s", s.Protocol, tt.member, s.Path, tt.path)
				}
			}
		})
	}
}

// mustRDCleanPath opens the RDP websocket at url and checks that the
// RDCleanPath gateway answers with the guest's certificate.
func mustRDCleanPath(t *testing.T, dialer websocket.Dialer, url, destination, token string) {
	t.Helper()
	rdp, _, err := dialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdp.Close()
	rdp.SetReadDeadline(time.Now().Add(15 * time.Second))
	x224 := []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xe0, 0, 0, 0, 0, 0, 0x01, 0x00, 0x08, 0x00, 0x03, 0, 0, 0}
	req, err := (&relay.RDCleanPathPDU{Version: relay.RDCleanPathVersion, Destination: destination, ProxyAuth: token, X224: x224}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rdp.WriteMessage(websocket.BinaryMessage, req)
	_, b, err := rdp.ReadMessage()
	if err != nil {
		t.Fatalf("RDCleanPath reply: %v", err)
	}
	resp, err := relay.UnmarshalRDCleanPath(b)
	if err != nil || resp.Error != nil || len(resp.ServerCertChain) == 0 {
		t.Fatalf("RDCleanPath reply %+v, %v; want the guest's certificate", resp, err)
	}
}

// startKubePortal runs a portal on the kube backend as in production: dev
// sign-in, the default disconnect grace (so nothing is reclaimed while the
// test connects).
func startKubePortal(t *testing.T, kubeconfig, ns string, extra ...string) *Main {
	t.Helper()
	env := map[string]string{
		"HOME": t.TempDir(), "CORRAL_VDI_LISTEN": "127.0.0.1:0", "CORRAL_VDI_DATA_DIR": t.TempDir(),
		"KUBECONFIG": kubeconfig, "CORRAL_VDI_NAMESPACE": ns, "CORRAL_VDI_AUTH": "dev",
	}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	cfg, err := ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	m := &Main{Config: cfg, Log: slog.New(slog.NewTextHandler(tlog{t, "portal"}, &slog.HandlerOptions{Level: slog.LevelDebug})), Out: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Open(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("portal: %v", err)
		}
		m.Close()
	})
	return m
}
