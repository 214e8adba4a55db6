package vdi_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestShare: the holder invites, the invitee opens while the invitation
// lives, and the rules around it (who may invite, whom, how long, how
// many) refuse with the right code; a release ends every invitation.
func TestShare(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	pool := leasetest.NewPool("local", "team", 2, 2)
	pool.Access = vdi.Access{Users: []string{"alice", "bob", "carol"}}
	svc := vdi.NewService(vdi.Config{Backend: pool, Leases: db.Leases(), Audit: db, Log: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return now }})
	alice, bob := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}
	mallory, ops := vdi.Identity{Login: "mallory"}, vdi.Identity{Login: "ops", Admin: true}
	d, err := svc.Claim(ctx, alice, "local", "team")
	if err != nil {
		t.Fatal(err)
	}
	ref := d.Ref()
	code := func(err error) vdi.Code {
		if err == nil {
			return ""
		}
		return vdi.ErrorCode(err)
	}

	if _, _, err := svc.SharedDesktop(ctx, bob, ref); code(err) != vdi.EForbidden {
		t.Fatalf("bob before any invitation: %v; want forbidden", err)
	}
	sh, err := svc.Share(ctx, alice, ref, vdi.ShareRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if sh.Control || !sh.Expires.Equal(now.Add(vdi.DefaultShareTTL)) || sh.By != "alice" {
		t.Errorf("invitation %+v; want view only, by alice, for an hour", sh)
	}
	got, gotShare, err := svc.SharedDesktop(ctx, bob, ref)
	if err != nil || got.Ref() != ref || gotShare.ID != sh.ID {
		t.Fatalf("bob, invited: %v %v %v", got.Ref(), gotShare.ID, err)
	}
	if got.Holder != "alice" {
		t.Errorf("bob sees holder %q; want alice", got.Holder)
	}
	// Inviting bob again updates his one invitation (the same id, the new
	// role), so that one revoke ends his access.
	again, err := svc.Share(ctx, alice, ref, vdi.ShareRequest{User: "bob", Control: true})
	if err != nil || again.ID != sh.ID || !again.Control || !again.RoleChanged {
		t.Errorf("bob invited again with control: %+v %v; want his invitation %s, with control, its role changed", again, err, sh.ID)
	}
	if list, err := svc.Shares(ctx, alice, ref); err != nil || len(list) != 1 || !list[0].Control {
		t.Errorf("after inviting bob twice: %+v %v; want one invitation, with control", list, err)
	}
	// bob's home page lists it; alice's does not.
	if mine, err := svc.SharedWithMe(ctx, bob); err != nil || len(mine) != 1 || mine[0].Holder != "alice" || mine[0].Name != ref.Name || !mine[0].Share.Control {
		t.Errorf("shared with bob: %+v %v; want alice's %s, with control", mine, err, ref.Name)
	}
	if mine, err := svc.SharedWithMe(ctx, alice); err != nil || len(mine) != 0 {
		t.Errorf("shared with alice: %+v %v; want none", mine, err)
	}

	for _, tc := range []struct {
		name string
		who  vdi.Identity
		req  vdi.ShareRequest
		want vdi.Code
	}{
		{"a stranger invites", mallory, vdi.ShareRequest{User: "carol"}, vdi.EForbidden},
		{"the invitee invites further", bob, vdi.ShareRequest{User: "carol"}, vdi.EForbidden},
		{"the holder invites themself", alice, vdi.ShareRequest{User: "alice"}, vdi.EInvalid},
		{"no login", alice, vdi.ShareRequest{User: " "}, vdi.EInvalid},
		{"a login with a space", alice, vdi.ShareRequest{User: "bob smith"}, vdi.EInvalid},
		{"not a duration", alice, vdi.ShareRequest{User: "carol", Expires: "forever"}, vdi.EInvalid},
		{"a stranger with a bad duration", mallory, vdi.ShareRequest{User: "carol", Expires: "forever"}, vdi.EForbidden},
		{"longer than a day", alice, vdi.ShareRequest{User: "carol", Expires: "25h"}, vdi.EInvalid},
		{"shorter than a minute", alice, vdi.ShareRequest{User: "carol", Expires: "1s"}, vdi.EInvalid},
		{"someone the pool is not for", alice, vdi.ShareRequest{User: "mallory"}, vdi.EForbidden},
		{"an admin overrides the pool's rules", ops, vdi.ShareRequest{User: "mallory", Control: true}, ""},
	} {
		if _, err := svc.Share(ctx, tc.who, ref, tc.req); code(err) != tc.want {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
	if _, _, err := svc.SharedDesktop(ctx, mallory, ref); err != nil {
		t.Errorf("mallory, invited by an admin past the rules: %v", err)
	}
	if list, err := svc.Shares(ctx, bob, ref); code(err) != vdi.EForbidden {
		t.Errorf("the invitee lists the invitations: %v %v; want forbidden", list, err)
	}

	// At most MaxShares at once; expired ones do not count.
	pool.Access = vdi.Access{}
	for i := range vdi.MaxShares - 2 {
		if _, err := svc.Share(ctx, alice, ref, vdi.ShareRequest{User: fmt.Sprintf("guest%d", i), Expires: "1m"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.Share(ctx, alice, ref, vdi.ShareRequest{User: "carol"}); code(err) != vdi.EConflict {
		t.Errorf("invitation %d: %v; want conflict", vdi.MaxShares+1, err)
	}
	now = now.Add(2 * time.Minute) // the guests' six run out
	if list, err := svc.Shares(ctx, alice, ref); err != nil || len(list) != 2 {
		t.Errorf("after the guests' expired: %d invitations (%v); want bob's and mallory's", len(list), err)
	}
	if _, _, err := svc.SharedDesktop(ctx, vdi.Identity{Login: "guest0"}, ref); code(err) != vdi.EForbidden {
		t.Errorf("guest0, expired: %v; want forbidden", err)
	}

	// The pool's rules apply to the invitee as they are now.
	pool.Access = vdi.Access{Users: []string{"alice"}}
	if _, _, err := svc.SharedDesktop(ctx, bob, ref); code(err) != vdi.EForbidden {
		t.Errorf("bob, the pool no longer for him: %v; want forbidden", err)
	}
	pool.Access = vdi.Access{}

	// The watch policy off takes no viewers, invited or not.
	pool.Policy = vdi.Policy{Watch: vdi.WatchOff}
	if _, _, err := svc.SharedDesktop(ctx, bob, ref); code(err) != vdi.EForbidden {
		t.Errorf("bob, watch off: %v; want forbidden", err)
	}
	if _, err := svc.Share(ctx, alice, ref, vdi.ShareRequest{User: "carol"}); code(err) != vdi.EForbidden {
		t.Errorf("invite with watch off: %v; want forbidden", err)
	}
	pool.Policy = vdi.Policy{}

	// Revoking ends bob's; an unknown id is not found.
	if _, err := svc.Unshare(ctx, alice, ref, "nope"); code(err) != vdi.ENotFound {
		t.Errorf("unshare an unknown id: %v; want not found", err)
	}
	if _, err := svc.Unshare(ctx, mallory, ref, sh.ID); code(err) != vdi.EForbidden {
		t.Errorf("mallory revokes: %v; want forbidden", err)
	}
	if gone, err := svc.Unshare(ctx, alice, ref, sh.ID); err != nil || gone.User != "bob" {
		t.Fatalf("unshare bob: %v %v", gone, err)
	}
	if _, _, err := svc.SharedDesktop(ctx, bob, ref); code(err) != vdi.EForbidden {
		t.Errorf("bob, revoked: %v; want forbidden", err)
	}

	// A release ends every invitation: a new claim starts with none.
	if err := svc.Release(ctx, alice, ref, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.SharedDesktop(ctx, mallory, ref); code(err) != vdi.EForbidden {
		t.Errorf("mallory after the release: %v; want forbidden", err)
	}
	if _, err := svc.Share(ctx, alice, ref, vdi.ShareRequest{User: "bob"}); code(err) != vdi.EForbidden && code(err) != vdi.EConflict {
		t.Errorf("invite on a released desktop: %v; want refused", err)
	}

	entries, err := db.AuditLog(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	var shares, unshares int
	for _, e := range entries {
		switch e.Action {
		case "share":
			shares++
			if e.Actor == "ops" && !strings.Contains(e.Detail, "past the pool's access rules") {
				t.Errorf("the admin's override is audited as %q", e.Detail)
			}
		case "unshare":
			unshares++
		}
	}
	if shares != vdi.MaxShares+1 || unshares != 1 {
		t.Errorf("audit: %d share and %d unshare rows; want %d and 1", shares, unshares, vdi.MaxShares+1)
	}
}

// TestShareControl: the holder hands control over and takes it back; the
// invitee's invitation says so, and nobody else may change it.
func TestShareControl(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pool := leasetest.NewPool("local", "team", 1, 1)
	svc := vdi.NewService(vdi.Config{Backend: pool, Leases: db.Leases(), Audit: db, Log: slog.New(slog.DiscardHandler)})
	alice, bob := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}
	d, err := svc.Claim(ctx, alice, "local", "team")
	if err != nil {
		t.Fatal(err)
	}
	sh, err := svc.Share(ctx, alice, d.Ref(), vdi.ShareRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	for _, control := range []bool{true, false} {
		if _, err := svc.SetShareControl(ctx, alice, d.Ref(), sh.ID, control); err != nil {
			t.Fatal(err)
		}
		if _, got, err := svc.SharedDesktop(ctx, bob, d.Ref()); err != nil || got.Control != control {
			t.Errorf("bob's invitation after control=%v: %+v %v", control, got, err)
		}
	}
	if _, err := svc.SetShareControl(ctx, bob, d.Ref(), sh.ID, true); vdi.ErrorCode(err) != vdi.EForbidden {
		t.Errorf("bob takes control himself: %v; want forbidden", err)
	}
	if _, err := svc.SetShareControl(ctx, alice, d.Ref(), "nope", true); vdi.ErrorCode(err) != vdi.ENotFound {
		t.Errorf("an unknown invitation: %v; want not found", err)
	}
}
