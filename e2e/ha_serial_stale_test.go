package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// serialAfterAFailedRelease: alice's serial console ends on a, but the
// API server refuses the delete of its Lease (an admission policy, as a
// cluster's own could), so the Lease still names a, which lives on.
// Her next serial console, on b, opens at once all the same: b asks a,
// which holds no such line, and takes the Lease over; so does the one
// after it on b itself. Before, both waited 10 s for a line nobody held
// and were refused until a restarted. The VMI's serial console sees one
// client after the other, none kicked. Once the API server takes deletes
// again, the last Lease goes by itself: its replica tries its delete again
// for half a minute (before, it stayed until a console took it over).
func serialAfterAFailedRelease(t *testing.T, hs *haScreen, a, b *haReplica) {
	t.Helper()
	lease := "corral-vdi-serial." + hs.ns + "." + hs.member
	lift := refuseDeletes(t, hs.admin, "corral-vdi-serial."+hs.ns+".")
	before := hs.standIn.Consoles(hs.ns, hs.member, "console")
	refused := map[*haReplica]int{} // the refused deletes each replica's log says
	for i, r := range []*haReplica{a, b, b} {
		began := time.Now()
		ws, res, err := dialWS(r.p, "alice", "/ws/serial/"+hs.ns+"/"+hs.member, r.p.URL)
		if err != nil {
			t.Fatalf("alice's serial console %d on %s, its Lease's delete refused before: %v (%v) after %v; want it open", i+1, r.name, err, status(res), time.Since(began).Round(time.Millisecond))
		}
		word := "st" + string(rune('a'+i)) + "le"
		must(t, ws.WriteMessage(websocket.BinaryMessage, []byte("echo "+word[:2]+"$((1-1))"+word[2:]+"\r")))
		if got := readUntil(ws, word[:2]+"0"+word[2:]); !strings.Contains(got, word[:2]+"0"+word[2:]) {
			t.Fatalf("alice's serial console %d on %s read %q; want her command's output", i+1, r.name, got)
		}
		ws.Close()
		refused[r]++
		waitFor(t, 15*time.Second, "the refused delete of the serial Lease in "+r.name+"'s log", func() bool {
			return strings.Count(r.p.Log(), "the owner record not deleted") >= refused[r]
		})
		var l coordinationv1.Lease
		must(t, hs.admin.Get(context.Background(), client.ObjectKey{Namespace: "corral-vdi", Name: lease}, &l))
		if got := *l.Spec.HolderIdentity; got != r.identity {
			t.Fatalf("after alice's serial console %d on %s the Lease names %q; want %s, its delete refused", i+1, r.name, got, r.identity)
		}
	}
	if n := hs.standIn.Consoles(hs.ns, hs.member, "console"); n.Opened != before.Opened+3 || n.Kicked != before.Kicked {
		t.Errorf("the VMI's serial console: %+v, before %+v; want 3 more opened, none kicked", n, before)
	}
	lift()
	waitFor(t, 45*time.Second, "the serial Lease deleted by "+b.name+"'s delete, tried again once deletes are taken", func() bool {
		err := hs.admin.Get(context.Background(), client.ObjectKey{Namespace: "corral-vdi", Name: lease}, &coordinationv1.Lease{})
		return apierrors.IsNotFound(err)
	})
	if !strings.Contains(b.p.Log(), "the owner record deleted, tried again") {
		t.Errorf("%s's log does not say the serial Lease was deleted when tried again", b.name)
	}
}

// refuseDeletes has the API server refuse every delete of a Lease whose
// name starts with prefix, from its return until lift is called or the
// test ends: a ValidatingAdmissionPolicy.
func refuseDeletes(t *testing.T, admin client.Client, prefix string) (lift func()) {
	t.Helper()
	return testcluster.Refuse(t, admin, testcluster.Refusal{
		Name:       strings.TrimSuffix(strings.ReplaceAll(prefix, ".", "-"), "-"),
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
		Group:      "coordination.k8s.io",
		Resource:   "leases",
		Allow:      "!request.name.startsWith('" + prefix + "')",
		Message:    "the test refuses deletes of these Leases",
	})
}
