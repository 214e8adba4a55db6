package kube

import (
	"slices"
	"strconv"
	"sync"
)

// A claim parses its CT pool's ConfigMap about three times (the pool, its
// members, the desktop answered), and a pool declared by its size alone
// has its members' names made from the size: a thousand strings and a
// set of them each time, most of what was left of listing a 1,000-member
// pool's members (BenchmarkKubeCTMembers). They are made once per pool
// name and size and shared by every parse: read-only.

// ctMembers are a pool's member names, in order, and the set of them.
type ctMembers struct {
	names []string
	set   map[string]bool
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
	m := &ctMembers{names: slices.Clip(numbered(pool, size)), set: make(map[string]bool, size)}
	for _, n := range m.names {
		m.set[n] = true
	}
	if len(numberedMemo.byDef) >= numberedMemoCap {
		clear(numberedMemo.byDef)
	}
	numberedMemo.byDef[def] = m
	return m
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
