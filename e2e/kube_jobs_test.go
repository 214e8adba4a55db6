package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestKube_DashboardShowsJobProgress: creating a VM pool answers 202 with
// a job at once; the job's progress is on GET of the job, in the pool
// list and on the admin dashboard ("cloning 3 of 6"), at laptop, tablet
// and phone sizes; the job goes on to a full pool. Then a user's Get a
// desktop answers while the VM boots: the console page says it is
// starting, and connects once it runs. Last, an admin cancels a grow
// from the dashboard.
func TestKube_DashboardShowsJobProgress(t *testing.T) {
	e := startKubeEnv(t)
	p := e.portal
	// Members are ready once their guest answers (a readinessProbe).
	golden := testcluster.StoppedVM(t, e.admin, e.ns, "golden", nil)
	if err := testcluster.Update(context.Background(), e.admin, golden, func(golden *kubevirtv1.VirtualMachine) {
		golden.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			ReadinessProbe: &kubevirtv1.Probe{Handler: kubevirtv1.Handler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(kube.PortVNC)}}}}}
	}); err != nil {
		t.Fatal(err)
	}
	e.standIn.SlowClones(e.ns, 0, 6*time.Second)

	var j job
	body := fmt.Sprintf(`{"namespace":%q,"name":"lab","kind":"vm","mode":"ephemeral","source":"golden","size":6,`+
		`"access":{"users":["alice"]},"policy":{"clipboard":"to-desktop"}}`, e.ns)
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", body, &j); code != 202 || j.State != "running" || j.Kind != "create" || j.Total != 6 {
		t.Fatalf("create a pool of 6 VMs: %d %+v; want 202 with a running create job", code, j)
	}

	// Once the first clones are in (the other two need 6 s more), no
	// clone finishes until the pictures are taken.
	waitFor(t, 2*time.Minute, "the first clones made", func() bool {
		p.API(t, "ops", "GET", "/api/vdi/pools/"+e.ns+"/lab/job", &j)
		return j.Done > 0 || j.State != "running"
	})
	e.standIn.HoldClones(e.ns)
	if j.State != "running" || j.Done == 6 {
		t.Fatalf("the job once clones were made: %+v; want it running", j)
	}

	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "ops", "/admin")
	line := page.Locator(`[data-pool="lab"] [data-testid="pool-job"]`)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(90000))
	must(t, expect.Locator(line).ToHaveText(regexp.MustCompile(`Creating the pool \(ops\): cloning [1-5] of 6 \(`)))

	// One job per pool: Resize, Delete and a member's Recreate (the
	// server answers 409) wait, and say why; Start and Assign of the
	// members already made do not wait.
	member := page.Locator(`[data-pool="lab"] [data-testid="member"]`).First()
	for _, b := range []playwright.Locator{page.Locator(`[data-pool="lab"]`).GetByTestId("resize"), page.Locator(`[data-pool="lab"]`).GetByTestId("delete-pool"),
		member.GetByTestId("recreate")} {
		must(t, expect.Locator(b).ToBeDisabled())
		must(t, expect.Locator(b).ToHaveAttribute("title", regexp.MustCompile(`Creating the pool \(ops\) is under way \(cloning .*Resize, Delete and Recreate wait until it ends`)))
	}
	must(t, expect.Locator(member.GetByTestId("assign")).ToBeEnabled())
	must(t, expect.Locator(page.Locator(`[data-pool="lab"]`).GetByTestId("cancel-job")).ToBeVisible())

	var pools []poolWithJob
	if p.API(t, "ops", "GET", "/api/vdi/pools", &pools); !hasRunningJob(pools, "lab") {
		t.Errorf("GET /api/vdi/pools: %+v; want pool lab with its running job", pools)
	}
	for _, size := range []struct {
		name          string
		width, height int
	}{{"laptop", 1280, 800}, {"tablet", 1024, 1366}, {"phone", 390, 844}} {
		must(t, page.SetViewportSize(size.width, size.height))
		must(t, expect.Locator(line).ToBeInViewport())
		must(t, expect.Locator(line).ToContainText("cloning"))
		screenshot(t, page, "kube-job-progress-"+size.name)
	}

	e.standIn.ReleaseClones(e.ns)
	must(t, expect.Locator(line).ToHaveCount(0))
	must(t, expect.Locator(page.Locator(`[data-pool="lab"]`).GetByTestId("resize")).ToBeEnabled())
	must(t, expect.Locator(member.GetByTestId("recreate")).ToBeEnabled())
	if code := p.API(t, "ops", "GET", "/api/vdi/pools/"+e.ns+"/lab/job", &j); code != 200 || j.State != "done" || j.Done != 6 {
		t.Fatalf("the job at the end: %d %+v; want done, 6 of 6", code, j)
	}
	if got := e.poolVMs(t, "lab"); len(got) != 6 {
		t.Fatalf("pool lab has VMs %v; want 6", got)
	}
	// Its clones were held mid-job: the pool is alice's alone, with its
	// policy, not open and not closed.
	var defined []definedPool
	p.API(t, "ops", "GET", "/api/vdi/pools", &defined)
	if i := slices.IndexFunc(defined, func(d definedPool) bool { return d.Name == "lab" }); i < 0 || defined[i].Closed != "" ||
		!slices.Equal(defined[i].Access.Users, []string{"alice"}) || defined[i].Policy.Clipboard != vdi.ClipboardToDesktop {
		t.Errorf("pool lab after its held clones: %+v; want alice's, clipboard to the desktop only, not closed", defined)
	}
	var bobs []poolWithJob
	if p.API(t, "bob", "GET", "/api/vdi/pools", &bobs); slices.ContainsFunc(bobs, func(b poolWithJob) bool { return b.Name == "lab" }) {
		t.Errorf("bob lists pool lab (%+v); want it hidden from him", bobs)
	}
	must(t, expect.Locator(page.Locator(`[data-pool="lab"] [data-testid="pool-counts"]`)).ToContainText("6 members"))

	for i := 1; i <= 6; i++ {
		e.standIn.GuestBootTakes(e.ns, fmt.Sprintf("lab-%d", i), 20*time.Second)
	}
	apage := b.MustNewPage(t, 1280, 800)
	signIn(t, apage, p, "alice", "/")
	must(t, apage.Locator(`[data-pool="lab"]`).GetByTestId("get-desktop").Click())
	must(t, apage.WaitForURL(regexp.MustCompile(`/desktops/`+e.ns+`/lab-\d$`)))
	// VNC: the RDP console would ask for the guest's password first.
	_, err := apage.Goto(apage.URL() + "?protocol=vnc")
	must(t, err)
	status := apage.GetByTestId("status")
	must(t, expect.Locator(status).ToContainText("Your desktop is starting"))
	screenshot(t, apage, "kube-console-starting")
	must(t, expect.Locator(status).ToHaveText("Connected"))
	screenshot(t, apage, "kube-console-started")

	// An admin cancels a grow from the dashboard: the job line says so at
	// once, and Resize is back.
	e.standIn.HoldClones(e.ns)
	if code := p.APIBody(t, "ops", "PATCH", "/api/vdi/pools/"+e.ns+"/lab", `{"size":8}`, &j); code != 202 || j.Kind != "grow" {
		t.Fatalf("grow to 8: %d %+v; want 202 with a grow job", code, j)
	}
	// Its two clones are asked for (and held) before the cancel, so that
	// they land after it, as the portal never sees them finish.
	waitFor(t, 2*time.Minute, "the grow's 2 clones asked for", func() bool {
		var clones clonev1beta1.VirtualMachineCloneList
		if e.admin.List(context.Background(), &clones, client.InNamespace(e.ns), client.MatchingLabels{kube.LabelClonePool: "lab"}) != nil {
			return false
		}
		return len(slices.DeleteFunc(clones.Items, func(c clonev1beta1.VirtualMachineClone) bool {
			return c.Labels[kube.LabelCloneTarget] != "lab-7" && c.Labels[kube.LabelCloneTarget] != "lab-8"
		})) == 2
	})
	must(t, page.SetViewportSize(1280, 800))
	lab := page.Locator(`[data-pool="lab"]`)
	must(t, expect.Locator(lab.GetByTestId("cancel-job")).ToBeVisible())
	adminAct(t, page, lab, "cancel-job", "")
	must(t, expect.Locator(line).ToHaveAttribute("data-state", "cancelled"))
	must(t, expect.Locator(line).ToContainText("Cancelled by ops."))
	must(t, expect.Locator(lab.GetByTestId("resize")).ToBeEnabled())
	screenshot(t, page, "kube-job-cancelled")
	if code := p.API(t, "ops", "GET", "/api/vdi/pools/"+e.ns+"/lab/job", &j); code != 200 || j.State != "cancelled" {
		t.Errorf("the grow after its cancel: %d %+v; want cancelled", code, j)
	}
	// The cancelled grow's clones land later, each carrying the pool's
	// definition from its clone: the pool is still alice's alone, with
	// its policy, and no member is open or closed.
	e.standIn.ReleaseClones(e.ns)
	waitFor(t, 2*time.Minute, "the cancelled grow's clones to land", func() bool { return len(e.poolVMs(t, "lab")) == 8 })
	for _, name := range []string{"lab-7", "lab-8"} {
		var vm kubevirtv1.VirtualMachine
		if err := e.admin.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, &vm); err != nil || vm.Annotations[kube.AnnotationAccess] == "" {
			t.Errorf("%s, landed after its grow was cancelled: %s=%q, %v; want the pool's access from its clone", name, kube.AnnotationAccess, vm.Annotations[kube.AnnotationAccess], err)
		}
	}
	waitFor(t, time.Minute, "pool lab to list 8 members", func() bool {
		defined = nil
		p.API(t, "ops", "GET", "/api/vdi/pools", &defined)
		i := slices.IndexFunc(defined, func(d definedPool) bool { return d.Name == "lab" })
		return i >= 0 && defined[i].Size == 8
	})
	if i := slices.IndexFunc(defined, func(d definedPool) bool { return d.Name == "lab" }); i < 0 || defined[i].Closed != "" ||
		!slices.Equal(defined[i].Access.Users, []string{"alice"}) || defined[i].Policy.Clipboard != vdi.ClipboardToDesktop {
		t.Errorf("pool lab once its cancelled grow's clones landed: %+v; want alice's, clipboard to the desktop only, not closed", defined)
	}
	var desks []struct {
		Name   string `json:"name"`
		Pool   string `json:"pool"`
		Closed string `json:"closed"`
	}
	p.API(t, "ops", "GET", "/api/vdi/desktops?all=1", &desks)
	for _, d := range desks {
		if d.Pool == "lab" && d.Closed != "" {
			t.Errorf("member %s closed (%s); want every member carrying the pool's definition", d.Name, d.Closed)
		}
	}
	bobs = nil
	if p.API(t, "bob", "GET", "/api/vdi/pools", &bobs); slices.ContainsFunc(bobs, func(b poolWithJob) bool { return b.Name == "lab" }) {
		t.Errorf("bob lists pool lab once its cancelled grow's clones landed (%+v); want it hidden from him", bobs)
	}
}

// poolWithJob is a pool as GET /api/vdi/pools lists it to an admin.
type poolWithJob struct {
	Name string `json:"name"`
	Job  *job   `json:"job"`
}

// definedPool is a pool's definition as GET /api/vdi/pools lists it to
// an admin.
type definedPool struct {
	Name   string     `json:"name"`
	Size   int        `json:"size"`
	Access vdi.Access `json:"access"`
	Policy struct {
		Clipboard vdi.Clipboard `json:"clipboard"`
	} `json:"policy"`
	Closed string `json:"closed"`
}

// hasRunningJob reports whether the pool list shows pool name with a
// running job whose progress counts its clones.
func hasRunningJob(pools []poolWithJob, name string) bool {
	for _, p := range pools {
		if p.Name == name && p.Job != nil && p.Job.State == "running" && strings.Contains(p.Job.Progress, " of 6 ") {
			return true
		}
	}
	return false
}
