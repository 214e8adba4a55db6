package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testPoolSamples: samples of one bucket merge (peaks by the highest,
// free by the lowest, counts added), read back by bucket or hour, and go
// with the history's size (each pool's newest buckets stay) and age.
func testPoolSamples(t *testing.T, open opener) {
	ctx := context.Background()
	db := open(t)
	t0 := time.Unix(1_800_000_000, 0).Truncate(time.Hour)
	db.Now = func() time.Time { return t0.Add(3 * time.Hour) }
	add := func(s vdi.PoolSample) {
		t.Helper()
		if s.Namespace == "" {
			s.Namespace, s.Pool = "local", "lab"
		}
		if err := db.AddPoolSample(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	one := vdi.PoolSample{Start: t0, Size: 10, Claimed: 9, Free: 1, Warm: 0, Refused: 1}
	one.Reclaims[2] = 1
	add(one)
	add(vdi.PoolSample{Start: t0, Size: 10, Claimed: 4, Free: 6, Warm: 2, Refused: 2}) // another replica, same bucket
	add(vdi.PoolSample{Start: t0.Add(5 * time.Minute), Size: 12, Claimed: 2, Free: 10, Warm: 3})
	add(vdi.PoolSample{Namespace: "other", Pool: "lab", Start: t0.Add(2 * time.Hour), Size: 1, Claimed: 1})

	got, err := db.PoolSamples(ctx, t0, vdi.SampleBucket)
	if err != nil || len(got) != 3 {
		t.Fatalf("PoolSamples = %+v, %v; want 3 buckets", got, err)
	}
	want := vdi.PoolSample{Namespace: "local", Pool: "lab", Start: t0, Size: 10, Claimed: 9, Free: 1, Warm: 2, Refused: 3}
	want.Reclaims[2] = 1
	if got[0].Start.Unix() != t0.Unix() {
		t.Errorf("first bucket starts %v; want %v", got[0].Start, t0)
	}
	got[0].Start = t0
	if got[0] != want {
		t.Errorf("merged bucket = %+v\nwant             %+v", got[0], want)
	}
	if got[2].Namespace != "other" {
		t.Errorf("last row = %+v; want the other namespace's pool", got[2])
	}
	hourly, err := db.PoolSamples(ctx, t0, time.Hour)
	if err != nil || len(hourly) != 2 || hourly[0].Size != 12 || hourly[0].Claimed != 9 || hourly[0].Free != 1 || hourly[0].Warm != 3 || hourly[0].Refused != 3 {
		t.Fatalf("hourly = %+v, %v; want lab's hour: size 12, 9 claimed, 1 free at least, 3 warm, 3 refused", hourly, err)
	}
	if _, err := db.PoolSamples(ctx, t0, 0); err == nil {
		t.Error("PoolSamples in steps of 0: no error")
	}
	if _, err := db.Prune(ctx, store.Retention{MaxRows: 1}); err != nil {
		t.Fatal(err)
	}
	got, err = db.PoolSamples(ctx, time.Unix(0, 0), vdi.SampleBucket)
	if err != nil || len(got) != 2 || got[0].Start.Unix() != t0.Add(5*time.Minute).Unix() || got[1].Namespace != "other" {
		t.Fatalf("after pruning to 1 bucket per pool: %+v, %v; want lab's newest bucket and other's", got, err)
	}
	if _, err := db.Prune(ctx, store.Retention{MaxAge: 90 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.PoolSamples(ctx, time.Unix(0, 0), vdi.SampleBucket); err != nil || len(got) != 1 || got[0].Namespace != "other" {
		t.Errorf("after pruning to 90 minutes: %+v, %v; want the newest bucket only", got, err)
	}
}
