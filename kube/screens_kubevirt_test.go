package kube_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/internal/testbrowser"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testencoder"
	"github.com/corral-dev/corral-vdi-portal/portal"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// envServe makes this test binary a portal replica (servePortal): the
// replicas of testKubeVirtOneScreen are real processes, which a SIGKILL
// ends as it ends a pod, without building the portal's binary here.
const envServe = "CORRAL_VDI_KUBE_TEST_SERVE"

// maybeServePortal runs the portal (serve, configured by the environment)
// and exits, when the test binary was started as a replica.
func maybeServePortal() {
	if os.Getenv(envServe) == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := portal.Serve(ctx, nil, os.Getenv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "portal:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// replica is a portal process of testKubeVirtOneScreen.
type replica struct {
	name, url string
	cmd       *exec.Cmd
	log       *bytes.Buffer // stderr: the portal's log
}

var servingRE = regexp.MustCompile(`serving on (http://\S+)`)

// startReplica starts this test binary as a portal replica with env and
// waits for its address; SIGTERM and a wait stop it when t ends.
func startReplica(t *testing.T, name string, env []string) *replica {
	t.Helper()
	r := &replica{name: name, log: new(bytes.Buffer)}
	r.cmd = exec.Command(os.Args[0])
	r.cmd.Env = append(os.Environ(), append(env, envServe+"=1", "CORRAL_VDI_LISTEN=127.0.0.1:0",
		"CORRAL_VDI_DATA_DIR="+t.TempDir(), "HOME="+t.TempDir())...)
	r.cmd.Stderr = r.log
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Signal(syscall.SIGTERM)
			r.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("replica %s's log:\n%s", r.name, lastLines(r.log.String(), 60))
		}
	})
	urls := make(chan string, 1)
	go func() {
		for sc := bufio.NewScanner(out); sc.Scan(); {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case r.url = <-urls:
	case <-time.After(60 * time.Second):
		t.Fatalf("replica %s did not start; log:\n%s", name, r.log.String())
	}
	return r
}

// dial opens user's console websocket at path on r.
func (r *replica) dial(path, user string) (*websocket.Conn, error) {
	h := http.Header{"Tailscale-User-Login": {user}, "Origin": {r.url}}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	ws, res, err := d.Dial("ws"+strings.TrimPrefix(r.url, "http")+path, h)
	if err != nil && res != nil {
		err = fmt.Errorf("%w (%s)", err, res.Status)
	}
	return ws, err
}

// watch opens user's VNC console of ref on r and watches its picture.
func (r *replica) watch(ref vdi.Ref, user string) (*snapshot.Viewer, error) {
	ws, err := r.dial("/ws/vnc/"+ref.Namespace+"/"+ref.Name, user)
	if err != nil {
		return nil, err
	}
	frame := new(closeFrame)
	reply := ws.CloseHandler()
	ws.SetCloseHandler(func(code int, text string) error {
		frame.got.Store(&websocket.CloseError{Code: code, Text: text})
		return reply(code, text)
	})
	v, err := snapshot.Watch(relay.NewWSConn(ws, relay.WSConnOptions{}))
	if err == nil {
		closeFrames.Store(v, frame)
	}
	return v, err
}

// mustWatch waits up to a minute for user's console of ref on r to open
// (while a killed owner's heartbeat runs out a replica refuses it).
func (r *replica) mustWatch(t *testing.T, ref vdi.Ref, user string) *snapshot.Viewer {
	t.Helper()
	var err error
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		var v *snapshot.Viewer
		if v, err = r.watch(ref, user); err == nil {
			t.Cleanup(func() { v.Close() })
			return v
		}
	}
	t.Fatalf("%s's console of %s on replica %s: %v", user, ref, r.name, err)
	return nil
}

// testKubeVirtOneScreen: one screen per desktop across portal replicas on
// KubeVirt's own control plane. Three replicas (this test binary serving
// as the portal, screen links on with a shared peer secret) share the
// cluster; the VMI reports no IP, so its screen is reached through
// KubeVirt's real virt-api and the node's virt-handler, which takes one
// VNC client. alice (the holder) watches on a, erin (invited, view only)
// and carol (invited with control) on b, ops (an admin) on c: all see the
// same pixels, and so does erin's invitation page in Chromium on b (the
// canvas, pixel for pixel); alice's and carol's keys reach the desktop,
// erin's do not; the replicas' H.264 encoders are the encoder sidecar's
// (a service on a Unix socket, as in the Pod of deploy/overlays/h264),
// and a console of erin's on b that asks for H.264 gets the screen as
// video; a thumbnail taken on b is virt-handler's screenshot, no
// second client; alice's console moves to c (a reload). Through all that
// virt-handler let one client in and refused or kicked none. Her serial
// console on a, her page in Chromium (through a front that vouches for her
// and sends her requests where the test says, as the Service would),
// taking over her first tab of it on c, which lets go of the VMI's one
// serial client before the page dials, is
// shared with erin and carol on b the same way (shareStream), and so is
// the terminal of her container desktop (a CT Pod on a node stand-in's
// kubelet, reached through pods/exec); ops's serial console and terminal
// on c join hers, view only (adminWatches); she reloads the terminal's page,
// which opens on c, and erin's and carol's terminals follow it there. a is
// SIGKILLed: alice's serial page reconnects by itself, on c, and the
// serial consoles on b follow it there; she reloads that page, which opens
// on b, where erin's and carol's are; the terminals on b and c go on; erin
// reconnects on b and alice on c by themselves, and so does erin's page;
// one of them takes the screen over once a's heartbeat runs out; still the
// same pixels, and virt-handler saw exactly one more client, one after the
// other, none kicked. alice leaves that tab open on c and opens the
// desktop again on b: the tab on c ends "taken over", erin's stays, no
// client more. Then the screen's owner (b or c) drains (SIGTERM): alice's
// and erin's consoles end with 1012 and the words that the screen moves,
// open again on the other replica, and virt-handler saw one client more,
// none kicked, and erin's page (its front sending it to the other)
// reconnects by itself saying so, the same pixels; the serial console (all
// three on b) and the terminal (alice on c, erin and carol on b) move as
// sharedStream.drained says (alice's serial page reconnecting by itself
// once it said the console moves). At every step of the serial console and
// the terminal carol's commands and alice's reach everyone, erin's keys
// nobody, and the desktop had one upstream at a time (virt-handler's
// serial clients, the kubelet's execs).
//
// It stands on its own (run alone, the earlier steps' claim and
// migration are not there): alice claims ref, and the node is whichever
// of nodes runs its VMI.
func testKubeVirtOneScreen(t *testing.T, s *kubeVirtSetup, ref vdi.Ref, nodes ...*testcluster.Node) {
	node := holdOn(t, s, ref, "alice", nodes...)
	ct := ctDesktop(t, s, "alice")
	if err := node.WithoutIPs(s.ctx, ref.Namespace, ref.Name); err != nil {
		t.Fatal(err)
	}
	env := []string{"CORRAL_VDI_BACKEND=kube", "CORRAL_VDI_AUTH=tailscale", "CORRAL_VDI_ADMINS=ops",
		"CORRAL_VDI_NAMESPACE=" + s.ns, "CORRAL_VDI_PEER_SECRET=" + strings.Repeat("s", 32),
		"CORRAL_VDI_DRAIN_TIMEOUT=2s", // as the Deployment has one
		"KUBECONFIG=" + testcluster.WriteKubeconfig(t, s.c.PortalServiceAccount(t))}
	h264 := testencoder.Start(t) // as the encoder sidecar of deploy/overlays/h264
	if h264 != "" {
		env = append(env, "CORRAL_VDI_H264="+h264)
	} else {
		t.Log("no GStreamer x264enc (scripts/deps.sh installs it): the replicas run without H.264")
	}
	a, b, c := startReplica(t, "a", env), startReplica(t, "b", env), startReplica(t, "c", env)
	before := node.Consoles(ref.Namespace, ref.Name, "vnc") // the earlier steps'

	for _, d := range []vdi.Ref{ref, ct} {
		for _, inv := range []string{`{"user":"erin","control":false}`, `{"user":"carol","control":true}`} {
			if code := a.call(t, "alice", "POST", "/api/vdi/desktops/"+d.Namespace+"/"+d.Name+"/shares", inv); code != 201 && code != 200 {
				t.Fatalf("alice invites %s to %s: %d", inv, d, code)
			}
		}
	}
	alice := a.mustWatch(t, ref, "alice")
	erin, carol := b.mustWatch(t, ref, "erin"), b.mustWatch(t, ref, "carol")
	ops := c.mustWatch(t, ref, "ops")
	all := []*snapshot.Viewer{alice, erin, carol, ops}
	h := samePicture(t, "alice on a, erin and carol on b, ops on c", all...)
	alice.Type("kube")
	h = settledPicture(t, "alice typed", h, all...)
	carol.Type("ctl")
	h = settledPicture(t, "carol (control, on b) typed", h, all...)
	if h264 != "" {
		// A second console of erin's on b asks for H.264: the screen a
		// holds comes as video from the encoder sidecar's service, over
		// the screen link, while alice types (then rubs it out: a key and
		// its erasure at once change nothing Xvnc sends).
		var typed atomic.Int32
		h264Reaches(t, b, ref, "erin", func() { alice.Type("v"); typed.Add(1) })
		alice.Type(strings.Repeat("\b", int(typed.Load())))
		h = samePicture(t, "alice typed and erased for the H.264 viewer", all...)
	}
	clients := func(want int) {
		t.Helper()
		n := node.Consoles(ref.Namespace, ref.Name, "vnc")
		if n.Opened-before.Opened != want || n.Kicked != before.Kicked {
			t.Fatalf("virt-handler's VNC console of the VMI: %+v (before the replicas: %+v); want %d more opened, none kicked", n, before, want)
		}
		t.Logf("virt-handler's VNC console: %+v (before the replicas: %+v)", n, before)
	}
	clients(1)
	// erin has her invitation's page open in Chromium too, on b: the
	// same pixels, no client more.
	br := testbrowser.MustLaunch(t)
	erinsPage := openSharedPage(t, br, "erin", ref, b)
	erinsPage.samePixels(t, "erin's page on b", alice)
	clients(1)
	viewOnlyDropped(t, erin, carol, h, all)
	erinsPage.samePixels(t, "erin's page on b after carol typed", alice)
	thumbNoSecondClient(t, b, node, ref)
	clients(1)

	// alice reloads her page, whose console opens on c this time: the
	// screen stays a's, and nobody's console closes.
	alice.Close()
	alice = c.mustWatch(t, ref, "alice")
	all = []*snapshot.Viewer{alice, erin, carol, ops}
	h = samePicture(t, "alice moved to c", all...)
	alice.Type("X")
	settledPicture(t, "alice typed on c", h, all...)
	for who, v := range map[string]*snapshot.Viewer{"erin": erin, "carol": carol, "ops": ops} {
		if err := v.Err(); err != nil {
			t.Errorf("%s's console closed while alice moved to c: %v; want it open", who, err)
		}
	}
	clients(1)
	if n := node.Consoles(ref.Namespace, ref.Name, "vnc"); n.Refused != before.Refused {
		t.Errorf("virt-handler refused %d VNC clients while a held the screen; want none: only the owner dials", n.Refused-before.Refused)
	}
	// alice's serial console is her page in Chromium, which her front
	// (the Service, vouching for her) sends to a: her second tab of it,
	// the first open on c. The first lets go of the VMI's one serial
	// client before the page's dials: it ends taken over, and
	// virt-handler sees one client more, none kicked (serial.up). Her
	// first tab left the line busy: what it typed waits for the guest,
	// and its close behind it; virt-handler lets the line go only once
	// it has read the close, and so must c (busyLine).
	first := c.mustStream(t, vdi.ProtocolSerial, ref, "alice")
	serialUp := newSerialUpstreams(node, ref)
	busyLine(t, first)
	page := openSerialPage(t, br, ref, a)
	if ce := closedStream(first); ce == nil || ce.Text != console.ErrTakenOver.Error() {
		t.Errorf("alice's first serial tab, on c, once her page opened it on a: ended with %v; want %q", ce, console.ErrTakenOver)
	}
	serial := shareStream(t, vdi.ProtocolSerial, ref, serialUp, page, a, b)
	serial.adminWatches(t, c) // ops on c joins alice's, view only
	termUp := newExecUpstreams(ct, nodes...)
	term := shareStream(t, vdi.ProtocolTerminal, ct, termUp, openHolderStream(t, vdi.ProtocolTerminal, ct, termUp, a), a, b)
	term.adminWatches(t, c)
	term.reload(t, c) // she reloads her page, whose terminal opens on c

	killed := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.cmd.Wait()
	page.front.sendTo(c) // the Service sends nothing more to the killed Pod
	for who, v := range map[string]*snapshot.Viewer{"alice": alice, "erin": erin, "carol": carol, "ops": ops} {
		select {
		case <-v.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s's console still open 30s after the screen's owner was SIGKILLed; want it closed", who)
		}
	}
	serial.reopen(t, "a was SIGKILLed", c) // her page reconnects by itself
	t.Logf("alice's serial page read her typing again %v after a's SIGKILL", time.Since(killed).Round(time.Millisecond))
	page.screenshots(t, "serial-after-kill")
	serial.reload(t, b) // she reloads her page, whose serial console opens on b, beside erin's and carol's
	term.bothType(t, "a was SIGKILLed")
	term.up.check(t, term.opened)
	erin = b.mustWatch(t, ref, "erin")
	alice = c.mustWatch(t, ref, "alice")
	samePicture(t, "after the owner's SIGKILL: erin on b, alice on c", alice, erin)
	t.Logf("both consoles showed the screen again %v after the owner's SIGKILL", time.Since(killed).Round(time.Millisecond))
	erinsPage.reconnected(t, "a, the screen's owner, was SIGKILLed", "")
	erinsPage.samePixels(t, "erin's page on b after the owner's SIGKILL", alice)
	testbrowser.Screenshot(t, erinsPage.page, "erin-vnc-after-kill")
	clients(2)

	alice = secondTabTakenOver(t, c, b, ref, alice, erin)
	samePicture(t, "alice's second tab on b, erin on b", alice, erin)
	clients(2)

	// A draining Pod leaves the Service's endpoints at once.
	to := other(screenOwner(t, s, ref, b, c), b, c)
	page.front.sendTo(to)
	erinsPage.front.sendTo(to)
	drained, again := drainHandsOver(t, s, ref, map[string]*snapshot.Viewer{"alice": alice, "erin": erin}, b, c)
	clients(3)
	erinsPage.reconnected(t, drained.name+", the screen's owner, drained", console.ScreenMoves[1:])
	erinsPage.samePixels(t, "erin's page after "+drained.name+" drained", again["alice"])
	for _, st := range []*sharedStream{serial, term} {
		st.drained(t, drained, other(drained, b, c))
	}
	if n := node.Consoles(ref.Namespace, ref.Name, "vnc"); n.Refused != before.Refused {
		t.Logf("virt-handler refused %d VNC clients during the failover and the drain (preserveSession): retried, never a kick", n.Refused-before.Refused)
	}
}

// holdOn makes user the holder of ref (asking again for a claim they
// have returns it) and returns which of nodes runs its VMI.
func holdOn(t *testing.T, s *kubeVirtSetup, ref vdi.Ref, user string, nodes ...*testcluster.Node) *testcluster.Node {
	t.Helper()
	key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	var vm kubevirtv1.VirtualMachine
	var vmi kubevirtv1.VirtualMachineInstance
	if err := s.admin.Get(s.ctx, key, &vm); err != nil {
		t.Fatal(err)
	}
	if err := s.admin.Get(s.ctx, key, &vmi); err != nil {
		t.Fatal(err)
	}
	pool := vm.Labels[vdi.LabelPool]
	svc := newService(s.vms, mustLeases(t, s.c.PortalServiceAccount(t)))
	if d, err := svc.Claim(s.ctx, vdi.Identity{Login: user}, ref.Namespace, pool); err != nil || d.Name != ref.Name || d.Holder != user {
		t.Fatalf("%s's claim of %s's pool %q: %+v, %v; want %s, theirs", user, ref, pool, d, err, ref.Name)
	}
	for _, n := range nodes {
		if n.Name() == vmi.Status.NodeName {
			return n
		}
	}
	t.Fatalf("VMI %s runs on node %q, none of the stand-ins", ref, vmi.Status.NodeName)
	return nil
}

// viewOnlyDropped: erin (view only) types, then carol (control) types a
// mark; carol then rubs her line out and, once the screen shows it, types
// it again. The screen comes back to what it was with the mark only if
// erin's keys never reached the desktop: had they, they would sit on the
// line and not be typed again. (Passing, it waits for conditions only.)
func viewOnlyDropped(t *testing.T, erin, carol *snapshot.Viewer, h [32]byte, all []*snapshot.Viewer) {
	t.Helper()
	erin.Type("rm -rf x")
	carol.Type("Z")
	marked := settledPicture(t, "carol typed a mark after erin (view only) typed", h, all...)
	for range len("kubectlZ") {
		carol.Type("\b")
	}
	settledPicture(t, "carol rubbed her line out", marked, all...) // her keys reach the desktop now
	carol.Type("kubectlZ")
	for end := time.Now().Add(30 * time.Second); samePicture(t, "carol typed her line again", all...) != marked; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the screen after carol typed her line again is not what it was with her mark: erin's keys (view only) reached the desktop")
		}
	}
}

// thumbNoSecondClient: ops's dashboard thumbnail of ref, taken on r (not
// the screen's owner), is virt-handler's screenshot: a picture, and no
// VNC client of the VMI more.
func thumbNoSecondClient(t *testing.T, r *replica, node *testcluster.Node, ref vdi.Ref) {
	t.Helper()
	shots, vnc := node.Screenshots(), node.Consoles(ref.Namespace, ref.Name, "vnc")
	req, _ := http.NewRequest("GET", r.url+"/admin/thumbs/"+ref.Namespace+"/"+ref.Name, nil)
	req.Header.Set("Tailscale-User-Login", "ops")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := png.Decode(res.Body); res.StatusCode != 200 || err != nil {
		t.Fatalf("ops's thumbnail on %s: %s, %v; want a PNG", r.name, res.Status, err)
	}
	if n := node.Screenshots(); n != shots+1 {
		t.Errorf("virt-handler served %d screenshots for the thumbnail; want 1", n-shots)
	}
	if n := node.Consoles(ref.Namespace, ref.Name, "vnc"); n != vnc {
		t.Errorf("virt-handler's VNC console after a thumbnail on %s: %+v; want %+v, no client more", r.name, n, vnc)
	}
}

// call sends user's API request to r with a JSON body and returns the
// status.
func (r *replica) call(t *testing.T, user, method, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, r.url+path, strings.NewReader(body))
	req.Header.Set("Tailscale-User-Login", user)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, r.name, err)
	}
	res.Body.Close()
	return res.StatusCode
}

// samePicture waits until every viewer has a picture and all are the
// same, and returns its hash.
func samePicture(t *testing.T, what string, vs ...*snapshot.Viewer) [32]byte {
	t.Helper()
	var hashes [][32]byte
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		hashes = hashes[:0]
		for _, v := range vs {
			img, gen := v.Frame()
			if gen == 0 {
				break
			}
			hashes = append(hashes, sha256.Sum256(img.Pix))
		}
		if len(hashes) == len(vs) && !slices.ContainsFunc(hashes, func(h [32]byte) bool { return h != hashes[0] }) {
			return hashes[0]
		}
	}
	t.Fatalf("%s: the viewers do not see one screen (hashes %x)", what, hashes)
	return [32]byte{}
}

// settledPicture waits until the viewers see one screen other than
// before that stays for a second (what was typed all drawn), and returns
// its hash.
func settledPicture(t *testing.T, what string, before [32]byte, vs ...*snapshot.Viewer) [32]byte {
	t.Helper()
	last := before
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		h := samePicture(t, what, vs...)
		if h != before && h == last {
			return h
		}
		last = h
	}
	t.Fatalf("%s: the screen did not change, or did not settle", what)
	return before
}
