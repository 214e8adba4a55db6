package store_test

import (
	"context"
	"testing"
	"time"
)

// testUserSettings: a setting is "" until kept, each user has their own,
// and keeping it again replaces it.
func testUserSettings(t *testing.T, open opener) {
	db := open(t)
	ctx := context.Background()
	get := func(login string) string {
		t.Helper()
		v, err := db.UserSetting(ctx, login, "size")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := get("alice"); v != "" {
		t.Fatalf("alice's size before any = %q; want none", v)
	}
	for _, v := range []string{"actual", "1600x900"} {
		if err := db.SetUserSetting(ctx, "alice", "size", v, time.Now()); err != nil {
			t.Fatal(err)
		}
		if got := get("alice"); got != v {
			t.Errorf("alice's size = %q; want %q", got, v)
		}
	}
	if v := get("bob"); v != "" {
		t.Errorf("bob's size = %q; want none (alice's is hers)", v)
	}
	if v, err := db.UserSetting(ctx, "alice", "other"); err != nil || v != "" {
		t.Errorf("alice's other setting = %q, %v; want none", v, err)
	}
}
