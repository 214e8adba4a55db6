package kube

import (
	"slices"
	"strconv"
	"sync"
)

// A claim parses its CT pool's ConfigMap about three times (the pool, its
// members, the desktop answered), and a pool declared by its size alone
// has its members' names made from the size: a thousand strings each
// time, and a set of them to match the Pods on each listing, most of what
// was left of listing a 1,000-member pool's members
// (BenchmarkKubeCTMembers). The names and each one's place are made once
// per pool name and size and shared by every parse: read-only.

// ctMembers are a pool's member names, in order, and each one's place.
type ctMembers struct {
	names []string
	index map[string]int
}

// numberedMemoCap bounds the definitions kept: a resize makes a new one.
const numberedMemoCap = 256

var numberedMemo = struct {
	sync.Mutex
	byDef map[numberedDef]*ctMembers
}{byDef: map[numberedDef]*ctMembers{}}

// numberedDef is what a size-declared pool's members follow from.
type numberedDef struct {
	pool string
	size int
}

// numberedMembers returns the members a size alone declares,
// pool-1..pool-size, shared: the caller must not change them.
func numberedMembers(pool string, size int) *ctMembers {
	def := numberedDef{pool, size}
	numberedMemo.Lock()
	defer numberedMemo.Unlock()
	if m := numberedMemo.byDef[def]; m != nil {
		return m
	}
	names := slices.Clip(numbered(pool, size))
	m := &ctMembers{names: names, index: indexOf(names)}
	if len(numberedMemo.byDef) >= numberedMemoCap {
		clear(numberedMemo.byDef)
	}
	numberedMemo.byDef[def] = m
	return m
}

// indexOf returns each of names' place in it.
func indexOf(names []string) map[string]int {
	out := make(map[string]int, len(names))
	for i, n := range names {
		out[n] = i
	}
	return out
}

// numbered returns the members a size alone declares: pool-1..pool-size,
// a new list.
func numbered(pool string, size int) []string {
	out := make([]string, size)
	for i := range out {
		out[i] = pool + "-" + strconv.Itoa(i+1)
	}
	return out
}
