package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testRecordings is the conformance suite's part on recordings' metadata.
func testRecordings(t *testing.T, open opener) {
	ctx := context.Background()
	db := open(t)
	t0 := time.Unix(1_800_000_000, 0)
	for i, r := range []store.Recording{
		{ID: "a", Login: "alice", Namespace: "local", Member: "rec-1", Protocol: "terminal", Format: "asciicast-v2"},
		{ID: "b", Login: "bob", Namespace: "local", Member: "rec-2", Protocol: "vnc", Format: "corral-rfb-v1"},
	} {
		r.StartedAt = t0.Add(time.Duration(i) * time.Hour)
		if err := db.CreateRecording(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if open, err := db.UnfinishedRecordings(ctx); err != nil || len(open) != 2 {
		t.Fatalf("UnfinishedRecordings = %d, %v; want 2", len(open), err)
	}
	if err := db.FinishRecording(ctx, "a", t0.Add(time.Minute), 1234); err != nil {
		t.Fatal(err)
	}

	t.Run("Get", func(t *testing.T) {
		r, err := db.Recording(ctx, "a")
		if err != nil || r.Bytes != 1234 || !r.EndedAt.Equal(t0.Add(time.Minute)) || r.Member != "rec-1" {
			t.Errorf("Recording(a) = %+v, %v; want rec-1, 1234 bytes, ended", r, err)
		}
		if _, err := db.Recording(ctx, "../../portal.db"); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("Recording(unknown) = %v; want ErrNotFound", err)
		}
	})
	t.Run("Filter", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    store.RecordingFilter
			want []string
		}{
			{"All", store.RecordingFilter{}, []string{"b", "a"}},
			{"Desktop", store.RecordingFilter{Namespace: "local", Member: "rec-2"}, []string{"b"}},
			{"User", store.RecordingFilter{User: "alice"}, []string{"a"}},
			{"Since", store.RecordingFilter{Since: t0.Add(time.Minute)}, []string{"b"}},
			{"Until", store.RecordingFilter{Until: t0.Add(time.Minute)}, []string{"a"}},
		} {
			rs, err := db.Recordings(ctx, tc.f)
			var got []string
			for _, r := range rs {
				got = append(got, r.ID)
			}
			if err != nil || len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Errorf("%s: Recordings = %v, %v; want %v", tc.name, got, err, tc.want)
			}
		}
	})
	t.Run("Retention", func(t *testing.T) {
		if n, err := db.RecordingBytes(ctx); err != nil || n != 1234 {
			t.Errorf("RecordingBytes = %d, %v; want 1234", n, err)
		}
		if by, err := db.RecordingBytesByUser(ctx); err != nil || by["alice"] != 1234 || by["bob"] != 0 || len(by) != 2 {
			t.Errorf("RecordingBytesByUser = %v, %v; want alice 1234, bob 0", by, err)
		}
		old, err := db.ExpiredRecordings(ctx, t0.Add(3*time.Hour))
		if err != nil || len(old) != 1 || old[0].ID != "a" {
			t.Fatalf("ExpiredRecordings = %v, %v; want only the finished a", old, err)
		}
		got, err := db.Recorded(ctx, []string{"a", "b", "c"})
		if err != nil || !got["a"] || !got["b"] || got["c"] {
			t.Errorf("Recorded = %v, %v; want a and b", got, err)
		}
		if err := db.DeleteRecording(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Recording(ctx, "a"); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("Recording after delete = %v; want ErrNotFound", err)
		}
	})
}
