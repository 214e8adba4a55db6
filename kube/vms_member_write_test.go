package kube_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// racer makes a member's definition write (the patch conditional on the
// VM's resourceVersion that ends a clone) lose on the real API server:
// before each one it lets through, while it has losses to give, another
// writer changes the VM, so the API server answers Conflict.
type racer struct {
	admin client.Client
	mu    sync.Mutex
	left  int // losses still to force; <0: for ever
	lost  int // losses forced
	// onLoss runs after each forced loss.
	onLoss func(lost int)
}

func (r *racer) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/virtualmachines/") && req.Body != nil {
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"resourceVersion"`)) {
				r.race(req)
			}
		}
		return rt.RoundTrip(req)
	})
}

// race writes the VM req patches, when losses are left to force.
func (r *racer) race(req *http.Request) {
	r.mu.Lock()
	if r.left == 0 {
		r.mu.Unlock()
		return
	}
	r.left--
	r.lost++
	lost := r.lost
	r.mu.Unlock()
	parts := strings.Split(req.URL.Path, "/")
	vm := &kubevirtv1.VirtualMachine{}
	vm.Namespace, vm.Name = parts[len(parts)-3], parts[len(parts)-1]
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"example.com/other-writer":"%d"}}}`, lost)
	if err := r.admin.Patch(context.Background(), vm, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		panic(fmt.Sprintf("the other writer's patch of %s/%s: %v", vm.Namespace, vm.Name, err))
	}
	if r.onLoss != nil {
		r.onLoss(lost)
	}
}

func (r *racer) losses() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

// testDefinitionWriteLoses: the write that puts its pool's definition on
// a member made fresh is never given up on while its work goes on: it
// loses to another writer ten times in a row (Conflicts forced on the
// real API server) and lands after them. When the work ends while it
// still loses, the member is never open: it carries the definition its
// clone was planned with (alice's), the pool reads alice's, bob may not
// use it, and the reclaim loop writes the definition on it.
func testDefinitionWriteLoses(t *testing.T, s *vmSetup) {
	ctx, admin := s.ctx, s.admin
	ns := s.c.Namespace(t)
	testcluster.StoppedVM(t, admin, ns, "golden", nil)
	bob := vdi.Identity{Login: "bob"}
	if err := s.vms.CreatePool(ctx, vdi.Pool{Namespace: ns, Name: "race", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "golden", Size: 2,
		Access: vdi.Access{Users: []string{"alice"}}, Policy: vdi.Policy{Record: true}}); err != nil {
		t.Fatalf("create pool race: %v", err)
	}
	r := &racer{admin: admin}
	cfg := rest.CopyConfig(s.sa)
	cfg.WrapTransport = r.wrap
	racing, err := kube.NewVMs(kube.Config{REST: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ref := vdi.Ref{Namespace: ns, Name: "race-1"}
	written := func(when string) {
		t.Helper()
		var vm kubevirtv1.VirtualMachine
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &vm); err != nil {
			t.Fatal(err)
		}
		if a := vm.Annotations[kube.AnnotationAccess]; !strings.HasPrefix(a, "{") || !strings.Contains(a, `"alice"`) {
			t.Errorf("%s: %s carries %s=%q; want alice's access written as JSON", when, ref.Name, kube.AnnotationAccess, a)
		}
		mustRecordedFor(t, s.vms, ns, "race", 2, "alice")
	}

	r.left = 10
	if err := racing.Recreate(ctx, ref); err != nil {
		t.Fatalf("recreate %s while its definition's write loses %d times: %v; want it written after them", ref, r.losses(), err)
	}
	if r.losses() != 10 {
		t.Fatalf("forced %d losses; want 10", r.losses())
	}
	written("after 10 lost writes")

	// The work ends (its job is cancelled) while the write still loses.
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.mu.Lock()
	r.left, r.lost = -1, 0
	r.onLoss = func(lost int) {
		if lost == 8 {
			cancel()
		}
	}
	r.mu.Unlock()
	err = racing.Recreate(jctx, ref)
	if err == nil || !strings.Contains(err.Error(), "stopped after") {
		t.Fatalf("recreate %s whose job ends while its write loses: %v; want an error saying the write stopped", ref, err)
	}
	r.mu.Lock()
	r.left = 0
	r.mu.Unlock()
	p, err := s.vms.Pool(ctx, ns, "race")
	if err != nil || p.Allows(bob) || p.Closed == "" && (len(p.Access.Users) != 1 || p.Access.Users[0] != "alice") {
		t.Errorf("pool race after a write that never landed: %+v, closed %q, %v; want alice's or closed, never bob's", p.Access, p.Closed, err)
	}
	ms, err := s.vms.Members(ctx, ns, "race")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == ref.Name && m.Closed == "" {
			var vm kubevirtv1.VirtualMachine
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &vm); err != nil {
				t.Fatal(err)
			}
			if canon := vm.Annotations[kube.AnnotationAccess]; !strings.HasPrefix(canon, "base64url.") {
				t.Errorf("%s after a write that never landed: open (%s=%q); want its planned definition, or closed", ref.Name, kube.AnnotationAccess, canon)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; n == 0; time.Sleep(100 * time.Millisecond) {
		if n, err = s.vms.RepairDefinitions(ctx); err != nil || time.Now().After(deadline) {
			t.Fatalf("repair: %d, %v; want race-1 written", n, err)
		}
	}
	written("after the reclaim loop's repair")
}
