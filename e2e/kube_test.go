package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// kubeEnv is a real kube-apiserver with the KubeVirt stand-in (whose VMs
// run real Xvnc + freerdp-shadow desktops) and a portal on the kube
// backend, signed in to the cluster as its ServiceAccount bound only to
// deploy/rbac.yaml.
type kubeEnv struct {
	cluster *testcluster.Cluster
	standIn *testcluster.KubeVirtStandIn
	admin   client.Client // cluster admin, for what kubectl users would do
	ns      string
	portal  *Portal
}

// startKubeEnv starts a kubeEnv whose portal has env besides its own.
func startKubeEnv(t *testing.T, env ...string) *kubeEnv {
	t.Helper()
	c := testcluster.MustStart(t)
	standIn := c.StartKubeVirtStandIn(t)
	c.Apply(t, "../deploy/rbac.yaml")
	e := &kubeEnv{cluster: c, standIn: standIn, admin: c.AdminClient(t), ns: c.Namespace(t)}
	kubeconfig := testcluster.WriteKubeconfig(t, c.PortalServiceAccount(t))
	e.portal = MustStartPortal(t, append([]string{"CORRAL_VDI_BACKEND=kube", "KUBECONFIG=" + kubeconfig, "CORRAL_VDI_ADMINS=ops"}, env...)...)
	return e
}

// vm reads a VM; ok is false when it does not exist.
func (e *kubeEnv) vm(t *testing.T, name string) (vm kubevirtv1.VirtualMachine, ok bool) {
	t.Helper()
	err := e.admin.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &vm)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return vm, err == nil
}

// vmi reports whether the VM's instance exists (the VM runs).
func (e *kubeEnv) vmi(t *testing.T, name string) bool {
	t.Helper()
	var vmi kubevirtv1.VirtualMachineInstance
	err := e.admin.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &vmi)
	if client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	return err == nil
}

// poolVMs returns the names of the VMs labelled into pool.
func (e *kubeEnv) poolVMs(t *testing.T, pool string) []string {
	t.Helper()
	var list kubevirtv1.VirtualMachineList
	must(t, e.admin.List(context.Background(), &list, client.InNamespace(e.ns), client.MatchingLabels{vdi.LabelPool: pool}))
	var names []string
	for _, vm := range list.Items {
		names = append(names, vm.Name)
	}
	slices.Sort(names)
	return names
}

// leases returns the claim Leases of pool.
func (e *kubeEnv) leases(t *testing.T, pool string) []string {
	t.Helper()
	var list coordinationv1.LeaseList
	must(t, e.admin.List(context.Background(), &list, client.InNamespace(e.ns), client.MatchingLabels{vdi.LabelPool: pool}))
	var names []string
	for _, l := range list.Items {
		names = append(names, l.Name)
	}
	return names
}

// dropIPs empties the VMI's interface list, as when the guest agent has
// not reported its addresses: only the apiserver path reaches it then.
func (e *kubeEnv) dropIPs(t *testing.T, name string) {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"interfaces": []any{}}})
	must(t, e.admin.Status().Patch(context.Background(), vmi, client.RawPatch(types.MergePatchType, patch)))
}

// waitFor fails t unless cond holds within d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !eventually(d, cond) {
		t.Fatalf("after %v: want %s", testwait.D(d), what)
	}
}

// drawn waits until noVNC has drawn a desktop on page.
func drawn(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(20000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	var colours int
	for end := time.Now().Add(testwait.D(15 * time.Second)); time.Now().Before(end); time.Sleep(150 * time.Millisecond) {
		v, err := page.Evaluate(canvasColours)
		must(t, err)
		if colours = toInt(v); colours > 20 {
			return
		}
	}
	screenshot(t, page, name+"-blank")
	t.Fatalf("%s: noVNC canvas has %d colours after 15s; want a drawn desktop (> 20)", name, colours)
}

// TestKube_VMPoolInTheBrowser is issue 4's proof on a real apiserver: an
// admin makes a pool of 3 from a golden VM, two users get different members
// that power on, each sees the desktop in Chromium, one over the direct path
// (the VMI's IP) and one over the KubeVirt vnc subresource through the
// apiserver; release stops a persistent member and re-clones an ephemeral
// one; resize 3 -> 5 -> 2 keeps the claimed member; delete leaves no VMs and
// no Leases.
func TestKube_VMPoolInTheBrowser(t *testing.T) {
	e := startKubeEnv(t)
	p := e.portal
	type guest struct{ vm, user, password string }
	guests := make(chan guest, 8)
	e.standIn.OnBoot(func(_, vm, _, user, password string) { guests <- guest{vm, user, password} })
	testcluster.StoppedVM(t, e.admin, e.ns, "golden", nil)
	body := fmt.Sprintf(`{"namespace":%q,"name":"desk","kind":"vm","mode":"persistent","source":"golden","size":3}`, e.ns)
	var perr apiError
	if code := p.CreatePool(t, "ops", body, &perr); code != 201 {
		t.Fatalf("create pool: %d %+v", code, perr)
	}
	if got := e.poolVMs(t, "desk"); !slices.Equal(got, []string{"desk-1", "desk-2", "desk-3"}) {
		t.Fatalf("pool desk has VMs %v; want desk-1..3", got)
	}

	// alice: the home page's Get a desktop, then the VNC console.
	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "alice", "/")
	row := page.Locator(`[data-pool="desk"]`)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	must(t, expect.Locator(row.GetByTestId("free")).ToHaveText("3 of 3 free"))
	begin := time.Now()
	must(t, row.GetByTestId("get-desktop").Click())
	re := regexp.MustCompile(`/desktops/` + e.ns + `/(desk-\d)$`)
	must(t, page.WaitForURL(re))
	alices := re.FindStringSubmatch(page.URL())[1]
	if _, err := page.Goto(page.URL() + "?protocol=vnc"); err != nil {
		t.Fatal(err)
	}
	drawn(t, page, "kube-alice-direct")
	t.Logf("alice's %s drawn over the direct path %v after Get a desktop", alices, time.Since(begin).Round(time.Millisecond))
	screenshot(t, page, "kube-alice")
	// KubeVirt gives a VM one display: a second window shows its own part
	// of it, grown to both windows' size.
	kubeScreens(t, e, page, alices)
	if !e.vmi(t, alices) {
		t.Fatalf("alice's %s shows a desktop but has no VMI", alices)
	}

	// A live migration moves alice's VM to a new IP under her open console
	// (#55): the old stream goes silent with no FIN; the portal closes it
	// once the VMI says the VM moved, and the page reconnects by itself,
	// once, to the desktop at its new address (direct again: the history
	// below wants alice's sessions direct).
	_, err := page.Evaluate(recordStates)
	must(t, err)
	moved := time.Now()
	from, to := e.standIn.Migrate(t, e.ns, alices)
	var said []string
	waitFor(t, 30*time.Second, "alice's page to lose its console at the migration and show it again", func() bool {
		said = pageSaid(t, page)
		return len(said) > 1 && said[len(said)-1] == "Connected"
	})
	drawn(t, page, "kube-alice-migrated")
	t.Logf("alice's %s migrated from %s to %s; her page said %q and showed the desktop again %v later",
		alices, from, to, said, time.Since(moved).Round(time.Millisecond))
	if n := slices.Index(said, "Connected"); n != len(said)-1 {
		t.Errorf("alice's page said %q across the migration; want one reconnect (Connected once, at the end)", said)
	}
	all := strings.Join(said, "\n")
	if !strings.Contains(all, "Your desktop moved to another node (a live migration). Reconnecting in") {
		t.Errorf("alice's page said %q across the migration; want it to say the desktop moved and that it reconnects", said)
	}
	for _, w := range []string{"Stopped", "no longer yours", "closed the connection", "failed"} {
		if strings.Contains(all, w) {
			t.Errorf("alice's page said %q across the migration; want no %q: the desktop only moved", said, w)
		}
	}

	// alice again, on the page's first console: RDP (IronRDP in the page,
	// the portal's RDCleanPath gateway, the guest's port 3389 at its IP),
	// signed in with what the guest's user knows.
	rpage := b.MustNewPage(t, 1280, 800)
	signIn(t, rpage, p, "alice", "/desktops/"+e.ns+"/"+alices)
	ironrdp := playwright.NewPlaywrightAssertions(testwait.MS(45000)) // compiles 6 MB of wasm first
	must(t, ironrdp.Locator(rpage.GetByTestId("rdp-username")).ToBeVisible())
	signInRDP := <-guests
	if signInRDP.vm != alices {
		t.Fatalf("the stand-in booted %s first; want alice's %s", signInRDP.vm, alices)
	}
	must(t, rpage.GetByTestId("rdp-username").Fill(signInRDP.user))
	must(t, rpage.GetByTestId("rdp-password").Fill(signInRDP.password))
	must(t, rpage.GetByTestId("rdp-password").Press("Enter"))
	must(t, ironrdp.Locator(rpage.GetByTestId("status")).ToHaveText("Connected"))
	drawnRDP(t, rpage, "alice's "+alices)
	screenshot(t, rpage, "kube-alice-rdp")
	// A guest's own RDP server takes Unicode keyboard events (Windows
	// does), so Type as keys types any text there as such events. This
	// guest's server, freerdp-shadow, logs each one it gets (and drops it):
	// press and release of each character.
	openControl(t, rpage, "clipboard-toggle")
	pasteAsKeys(t, rpage, "ü日")
	unicode := 0
	if !eventually(10*time.Second, func() bool {
		unicode = strings.Count(e.standIn.GuestLog(e.ns, alices, "freerdp-shadow"), "unicode_keyboard_event")
		return unicode >= 4
	}) {
		t.Errorf("alice's RDP server got %d Unicode keyboard events; want 4 (ü and 日, each pressed and released)", unicode)
	}
	// So does what an input method commits over the console (ime.js).
	desk, err := rpage.Locator("iron-remote-desktop").BoundingBox()
	must(t, err)
	must(t, rpage.Mouse().Click(desk.X+desk.Width/2, desk.Y+desk.Height/2))
	newDevInput(t, rpage).compose([]string{"に", "日本"}, "日本語")
	if !eventually(10*time.Second, func() bool {
		unicode = strings.Count(e.standIn.GuestLog(e.ns, alices, "freerdp-shadow"), "unicode_keyboard_event")
		return unicode >= 10
	}) {
		t.Errorf("alice's RDP server got %d Unicode keyboard events; want 10 (and 日本語 composed, each pressed and released)", unicode)
	}
	rpage.Close()

	// bob: a different member; his VMI loses its IPs, so the apiserver path.
	bobs := p.claimRunning(t, "bob", e.ns, "desk")
	if bobs.Name == alices {
		t.Fatalf("bob got %+v; want a running member other than alice's %s", bobs, alices)
	}
	e.dropIPs(t, bobs.Name)
	bpage := b.MustNewPage(t, 1024, 700)
	signIn(t, bpage, p, "bob", "/desktops/"+e.ns+"/"+bobs.Name+"?protocol=vnc")
	drawn(t, bpage, "kube-bob-apiserver")
	screenshot(t, bpage, "kube-bob")

	// bob invites three colleagues, one with control, and an admin
	// watches too: all five see bob's VM through the one VNC connection
	// the portal holds to it (KubeVirt lets one viewer in: a second
	// connection would disconnect bob), and bob is never kicked.
	kickedBefore := e.standIn.Kicked(e.ns, bobs.Name)
	watchers := map[string]playwright.Page{}
	for _, inv := range []struct {
		user    string
		control bool
	}{{"carol", false}, {"dave", false}, {"erin", true}} {
		var sh struct{ URL string }
		body := fmt.Sprintf(`{"user":%q,"control":%v}`, inv.user, inv.control)
		if code := p.APIBody(t, "bob", "POST", "/api/vdi/desktops/"+e.ns+"/"+bobs.Name+"/shares", body, &sh); code != 201 && code != 200 {
			t.Fatalf("bob invites %s: %d", inv.user, code)
		}
		page := b.MustNewPage(t, 800, 600)
		signIn(t, page, p, inv.user, strings.TrimPrefix(sh.URL, p.URL))
		watchers[inv.user] = page
	}
	admin := b.MustNewPage(t, 800, 600)
	signIn(t, admin, p, "ops", "/admin/shadow/"+e.ns+"/"+bobs.Name)
	watchers["ops"] = admin
	for user, page := range watchers {
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		drawn(t, page, "kube-bob-seen-by-"+user)
	}
	must(t, expect.Locator(watchers["erin"].GetByTestId("share-role")).ToHaveText("you can type and point"))
	time.Sleep(time.Second)
	if s, _ := bpage.GetByTestId("status").TextContent(); s != "Connected" {
		t.Errorf("bob's console with four viewers: %q; want still Connected", s)
	}
	if n := e.standIn.Kicked(e.ns, bobs.Name) - kickedBefore; n != 0 {
		t.Errorf("virt-handler closed %d VNC clients of bob's VMI while five people watched; want 0 (one connection)", n)
	}
	screenshot(t, watchers["carol"], "kube-bob-shared")
	// A screen window is the holder's alone (#57): an admin's or a
	// stranger's ?screen=2 of bob's VM, and bob's own fourth screen, are
	// refused before the upgrade, and bob's console stays.
	for _, c := range []struct {
		user, query string
		status      int
		says        string
	}{
		{"ops", "?screen=2", 403, "Only the desktop's holder adds screens"},
		{"mallory", "?screen=2", 403, ""},
		{"bob", "?screen=4", 400, "at most 3 screens"},
	} {
		ws, res, err := dialWS(p, c.user, "/ws/vnc/"+e.ns+"/"+bobs.Name+c.query, p.URL)
		if ws != nil {
			ws.Close()
		}
		if res == nil {
			t.Fatalf("%s's %s of bob's VM: %v", c.user, c.query, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != c.status || !strings.Contains(string(body), c.says) {
			t.Errorf("%s's %s of bob's VM: %d %s; want %d saying %q", c.user, c.query, res.StatusCode, body, c.status, c.says)
		}
	}
	for _, page := range watchers {
		page.Close()
	}

	paths := map[string]string{}
	waitFor(t, 10*time.Second, "sessions of alice (direct) and bob (apiserver) recorded", func() bool {
		for _, r := range csvRows(t, p, "/admin/history/sessions.csv") {
			if len(r) > 5 && r[3] != "member" {
				paths[r[1]+"/"+r[3]] = r[5]
			}
		}
		return paths["alice/"+alices] == "direct" && paths["bob/"+bobs.Name] == "apiserver"
	})

	// Release: alice's persistent member stops and keeps its VM.
	if code := p.API(t, "alice", "POST", "/api/vdi/desktops/"+e.ns+"/"+alices+"/release", nil); code != 200 {
		t.Fatalf("alice's release: %d", code)
	}
	waitFor(t, 30*time.Second, "alice's persistent member stopped, VMI gone, VM kept", func() bool {
		vm, ok := e.vm(t, alices)
		return ok && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped && !e.vmi(t, alices)
	})

	// Resize 3 -> 5 -> 2: bob's claimed member survives the shrink.
	if code := p.awaitJob(t, "ops", "PATCH", "/api/vdi/pools/"+e.ns+"/desk", `{"size":5}`, 200, nil); code != 200 {
		t.Fatalf("grow to 5: %d", code)
	}
	if got := e.poolVMs(t, "desk"); len(got) != 5 {
		t.Fatalf("after growing to 5 the pool has %v", got)
	}
	if code := p.awaitJob(t, "ops", "PATCH", "/api/vdi/pools/"+e.ns+"/desk", `{"size":2}`, 200, nil); code != 200 {
		t.Fatalf("shrink to 2: %d", code)
	}
	if got := e.poolVMs(t, "desk"); len(got) != 2 || !slices.Contains(got, bobs.Name) {
		t.Fatalf("after shrinking to 2 the pool has %v; want 2 with bob's %s", got, bobs.Name)
	}

	// Delete: refused while bob holds one, then clean.
	if code := p.API(t, "ops", "DELETE", "/api/vdi/pools/"+e.ns+"/desk", &perr); code != 409 {
		t.Fatalf("delete with a claimed desktop: %d %+v; want 409", code, perr)
	}
	if code := p.API(t, "bob", "POST", "/api/vdi/desktops/"+e.ns+"/"+bobs.Name+"/release", nil); code != 200 {
		t.Fatalf("bob's release: %d", code)
	}
	// The release answers while the VM stops (#55): the pool is free, and
	// can be deleted, once it has.
	waitFor(t, 2*time.Minute, "pool desk free again after bob's release", func() bool {
		var pools []pool
		p.API(t, "ops", "GET", "/api/vdi/pools", &pools)
		return slices.ContainsFunc(pools, func(pl pool) bool { return pl.Name == "desk" && pl.Free == pl.Size })
	})
	if code := p.API(t, "ops", "DELETE", "/api/vdi/pools/"+e.ns+"/desk", &perr); code != 200 && code != 204 {
		t.Fatalf("delete: %d %+v", code, perr)
	}
	waitFor(t, 10*time.Second, "no VMs and no Leases left of pool desk", func() bool {
		return len(e.poolVMs(t, "desk")) == 0 && len(e.leases(t, "desk")) == 0
	})
}

// TestKube_EphemeralReleaseReclones: releasing an ephemeral member makes it
// again from the golden VM (a new UID), stopped and free.
func TestKube_EphemeralReleaseReclones(t *testing.T) {
	e := startKubeEnv(t)
	p := e.portal
	testcluster.StoppedVM(t, e.admin, e.ns, "golden", nil)
	body := fmt.Sprintf(`{"namespace":%q,"name":"eph","kind":"vm","mode":"ephemeral","source":"golden","size":1}`, e.ns)
	if code := p.CreatePool(t, "ops", body, nil); code != 201 {
		t.Fatalf("create pool: %d", code)
	}
	d := p.claimRunning(t, "carol", e.ns, "eph")
	before, _ := e.vm(t, d.Name)
	if code := p.API(t, "carol", "POST", "/api/vdi/desktops/"+e.ns+"/"+d.Name+"/release", nil); code != 200 {
		t.Fatalf("release: %d", code)
	}
	// The release answers while the re-clone goes on; the member is free
	// again once it is fresh.
	waitFor(t, 30*time.Second, "the ephemeral member re-cloned (new UID) and stopped", func() bool {
		vm, ok := e.vm(t, d.Name)
		return ok && vm.UID != before.UID && vm.Labels[vdi.LabelPool] == "eph" &&
			vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped && !e.vmi(t, d.Name)
	})
	waitFor(t, 30*time.Second, "pool eph free again after the re-clone", func() bool {
		var pools []pool
		p.API(t, "carol", "GET", "/api/vdi/pools", &pools)
		return slices.ContainsFunc(pools, func(pl pool) bool { return pl.Name == "eph" && pl.Free == 1 })
	})
}

// TestKube_CTPoolTerminal: a CT pool on the cluster (Pods from an image,
// run by the test kubelet) gives its user a terminal in Chromium through
// pods/exec on the apiserver, recorded as such; release recreates the Pod.
func TestKube_CTPoolTerminal(t *testing.T) {
	e := startKubeEnv(t)
	e.cluster.StartKubelet(t)
	p := e.portal
	body := fmt.Sprintf(`{"namespace":%q,"name":"shells","kind":"ct","mode":"ephemeral","source":"corral.test/shell","size":1}`, e.ns)
	var perr apiError
	if code := p.CreatePool(t, "ops", body, &perr); code != 201 {
		t.Fatalf("create CT pool: %d %+v", code, perr)
	}
	page := MustLaunchBrowser(t).MustNewPage(t, 1024, 700)
	signIn(t, page, p, "dana", "/")
	row := page.Locator(`[data-pool="shells"]`)
	must(t, row.GetByTestId("get-desktop").Click())
	re := regexp.MustCompile(`/desktops/` + e.ns + `/(shells-\d)$`)
	must(t, page.WaitForURL(re))
	member := re.FindStringSubmatch(page.URL())[1]
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(20000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	must(t, page.GetByTestId("xterm").Click())
	must(t, page.Keyboard().Type("echo ct-$((6*7))\n"))
	waitXterm(t, page, regexp.MustCompile(`ct-42`), 15*time.Second)
	screenshot(t, page, "kube-ct-terminal")

	var pod corev1.Pod
	must(t, e.admin.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: member}, &pod))
	if _, err := page.Goto(p.URL + "/"); err != nil { // closes the console
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "dana's terminal session recorded on the apiserver path", func() bool {
		for _, r := range csvRows(t, p, "/admin/history/sessions.csv") {
			if len(r) > 5 && r[1] == "dana" && r[3] == member && r[4] == "terminal" && r[5] == "apiserver" {
				return true
			}
		}
		return false
	})
	if code := p.API(t, "dana", "POST", "/api/vdi/desktops/"+e.ns+"/"+member+"/release", nil); code != 200 {
		t.Fatalf("release: %d", code)
	}
	waitFor(t, 20*time.Second, "the ephemeral CT member's Pod recreated (new UID)", func() bool {
		var now corev1.Pod
		err := e.admin.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: member}, &now)
		return err == nil && now.UID != pod.UID
	})
}
