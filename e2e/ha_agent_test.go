package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// toolAnswer is what a tool call answered: its text, and whether it was
// refused.
type toolAnswer struct {
	text    string
	refused bool
}

// callInFlight starts a wait_for_change of a minute on desk and returns
// once it has run 2 s (a screen that changed on its own ends a wait
// early: it is started again); the channel gets its answer.
func callInFlight(t *testing.T, s *mcp.ClientSession, desk string) <-chan toolAnswer {
	t.Helper()
	var inFlight chan toolAnswer
	waitFor(t, 2*time.Minute, "a wait_for_change in flight", func() bool {
		inFlight = make(chan toolAnswer, 1)
		go func() {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_for_change", Arguments: map[string]any{"desktop": desk, "timeout_ms": 60000}})
			if err != nil {
				inFlight <- toolAnswer{err.Error(), true}
				return
			}
			inFlight <- toolAnswer{resultText(res), res.IsError}
		}()
		select {
		case a := <-inFlight:
			t.Logf("the wait ended on its own: %q", a.text)
			return false
		case <-time.After(2 * time.Second):
			return true
		}
	})
	return inFlight
}

// TestHA_AgentOversight: oversight of an agent holds across replicas
// (haScreen). Alice's console is on replica a; her agent works in the
// desktop through replica b (its token made there; its screen a link to
// the one a holds, reached through the API server's vnc subresource as
// the VMI has no IP). Alice presses Stop through replica a while the
// agent's wait_for_change runs on b: the call ends then, refused with her
// name (b's watch of the claim sees the change; a never saw the call),
// and so does the agent's next call on b, until she lets it go on
// through a; stopped with no call in flight, the agent's screen on b
// closes as b sees the stop. Alice's own input in her console on a
// suspends the agent's input on b (recorded on the claim), which comes
// back once she has let go for the hold (agent.TakeoverHold).
func TestHA_AgentOversight(t *testing.T) {
	hs := startHAScreen(t)
	a, b := hs.reps["a"], hs.reps["b"]
	desk := hs.ns + "/" + hs.member
	oversight := "/api/vdi/desktops/" + desk + "/oversight/"
	// Alice's console on a holds the screen (the agent's on b is a link
	// to it) and keeps her claim from the disconnect grace.
	alice := hs.open(t, a, "alice")
	if _, err := alice.screen(t); err != nil {
		t.Fatalf("alice's screen on a: %v", err)
	}
	tok := mustToken(t, b.p, "alice", `{"name": "runner", "pools": ["`+hs.ns+`/scr"]}`)
	s := mustMCP(t, b.p, tok.Token)
	var c struct{ Desktop string }
	jsonInto(t, resultText(tool(t, s, "claim_desktop", map[string]any{"pool": hs.ns + "/scr"})), &c)
	if c.Desktop != desk {
		t.Fatalf("the agent claimed %q; want alice's %s back", c.Desktop, desk)
	}
	tool(t, s, "screenshot", map[string]any{"desktop": desk})
	// The consoles the claim counts open: alice's on a, the agent's
	// screen on b (held as a console of the claim while open).
	consoles := func() string {
		var l coordinationv1.Lease
		if err := hs.admin.Get(context.Background(), client.ObjectKey{Namespace: hs.ns, Name: vdi.LeasePrefix + hs.member}, &l); err != nil {
			t.Fatalf("alice's claim: %v", err)
		}
		return l.Annotations[vdi.AnnotationConsoles]
	}
	// agentScreen reports whether the desktop's viewers, through every
	// replica, list the agent's screen open (an agent stopped after its
	// screen closed stays listed, with no time it opened).
	agentScreen := func() bool {
		var list []struct {
			Role  string
			Since time.Time
		}
		a.p.API(t, "alice", "GET", "/api/vdi/desktops/"+desk+"/viewers", &list)
		for _, v := range list {
			if v.Role == "agent" && !v.Since.IsZero() {
				return true
			}
		}
		return false
	}

	t.Run("StopOnAnotherReplica", func(t *testing.T) {
		inFlight := callInFlight(t, s, desk)
		stopped := time.Now()
		if code := a.p.APIBody(t, "alice", "POST", oversight+"stop", "", nil); code != 200 {
			t.Fatalf("alice stops her agent through a: %d", code)
		}
		select {
		case got := <-inFlight:
			t.Logf("the call on b ended %v after the stop on a", time.Since(stopped).Round(time.Millisecond))
			if !got.refused || !strings.Contains(got.text, "alice stopped the agent's work") {
				t.Errorf("the call in flight on b when alice stopped the agent on a: refused %v, %q", got.refused, got.text)
			}
		case <-time.After(90 * time.Second):
			t.Fatal("the agent's wait_for_change on b went on 90 s after alice stopped it on a")
		}
		if got := toolRefused(t, s, "screenshot", map[string]any{"desktop": desk}); !strings.Contains(got, "alice stopped the agent's work") {
			t.Errorf("the stopped agent's next call on b said %q", got)
		}
		if code := a.p.APIBody(t, "alice", "POST", oversight+"go-on", "", nil); code != 200 {
			t.Fatalf("alice lets her agent go on through a: %d", code)
		}
		waitFor(t, time.Minute, "the agent on b working again after alice let it go on through a", func() bool {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "screenshot", Arguments: map[string]any{"desktop": desk}})
			return err == nil && !res.IsError
		})
	})

	// The attacker's row: an agent stopped through another replica keeps
	// no screen of the desktop. Its screen on b is open with no call in
	// flight (a call cut by the stop closes it anyway); b closes it as it
	// sees the stop on a, not when the seat's idle time (5 min) runs out.
	t.Run("StoppedAgentKeepsNoScreenElsewhere", func(t *testing.T) {
		tool(t, s, "screenshot", map[string]any{"desktop": desk})
		waitFor(t, time.Minute, "alice's console on a and the agent's screen on b open, counted on the claim", func() bool { return agentScreen() && consoles() == "2" })
		stopped := time.Now()
		if code := a.p.APIBody(t, "alice", "POST", oversight+"stop", "", nil); code != 200 {
			t.Fatalf("alice stops her agent through a: %d", code)
		}
		waitFor(t, time.Minute, "the stopped agent's screen on b closed, alice's console on a the claim's only one", func() bool { return !agentScreen() && consoles() == "1" })
		t.Logf("the agent's screen on b closed %v after the stop on a", time.Since(stopped).Round(time.Millisecond))
		if code := a.p.APIBody(t, "alice", "POST", oversight+"go-on", "", nil); code != 200 {
			t.Fatalf("alice lets her agent go on through a: %d", code)
		}
		waitFor(t, time.Minute, "the agent on b working again after alice let it go on through a", func() bool {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "screenshot", Arguments: map[string]any{"desktop": desk}})
			return err == nil && !res.IsError
		})
	})

	t.Run("PersonInputOnAnotherReplica", func(t *testing.T) {
		typeX := func() toolAnswer {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "type_text", Arguments: map[string]any{"desktop": desk, "text": "x"}})
			if err != nil {
				t.Fatal(err)
			}
			return toolAnswer{resultText(res), res.IsError}
		}
		if got := typeX(); got.refused {
			t.Fatalf("the agent's input on b before alice typed: %q", got.text)
		}
		// Alice presses Shift in her console on a: the agent's input on
		// b waits (b learns it from the claim).
		var got toolAnswer
		waitFor(t, time.Minute, "the agent's input on b suspended once alice typed on a", func() bool {
			alice.send(t, []byte{4, 1, 0, 0, 0, 0, 0xff, 0xe1})
			alice.send(t, []byte{4, 0, 0, 0, 0, 0, 0xff, 0xe1})
			got = typeX()
			return got.refused
		})
		if !strings.Contains(got.text, "alice took control") {
			t.Errorf("the agent on b was told %q", got.text)
		}
		// She lets go: the agent's input on b comes back after the hold.
		idle := time.Now()
		waitFor(t, 2*time.Minute, "the agent's input on b back after alice's input on a ended", func() bool {
			time.Sleep(time.Second)
			return !typeX().refused
		})
		t.Logf("the agent's input on b came back %v after alice's last input on a", time.Since(idle).Round(time.Second))
	})
}
