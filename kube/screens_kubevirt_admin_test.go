package kube_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
)

// adminWatches: ops, an admin, opens the console on r, a replica where
// neither alice's nor the invitees' is: it joins alice's over a stream
// link, view only, as erin's does, never a serial client or shell of
// its own beside hers (the VMI takes one serial client). ops's keys,
// sent first, reach nobody; carol's command reaches everyone, ops too;
// no upstream more. ops then leaves.
func (s *sharedStream) adminWatches(t *testing.T, r *replica) {
	t.Helper()
	ops := r.mustStream(t, s.p, s.ref, "ops")
	defer ops.Close()
	send(t, ops, "echo op$((3*3))s\r")
	s.step++
	word := fmt.Sprintf("o%dx42", s.step)
	send(t, s.carol, fmt.Sprintf("echo o%dx$((6*7))\r", s.step))
	read := map[string]string{"alice on " + s.holder.name: s.alice.read(word), "ops on " + r.name: readUntil(ops, word)}
	for who, ws := range map[string]*websocket.Conn{"erin": s.erin, "carol": s.carol} {
		read[who+" on "+s.invitees.name] = readUntil(ws, word)
	}
	for who, got := range read {
		if !strings.Contains(got, word) || strings.Contains(got, "op9s") {
			t.Errorf("ops (an admin) watches on %s: %s's %s console read %q; want carol's command's output (%s) and nothing of ops's, view only (op9s)", r.name, who, s.p, lastLines(got, 10), word)
		}
	}
	s.up.check(t, s.opened)
}
