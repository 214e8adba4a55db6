package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Every claim lists its pool's Leases, so in a claim storm the N-th claim
// reads N-1 Leases and the storm costs N² rows. A SQLite portal therefore
// keeps each pool's Leases as it last read them and, on the next List,
// reads only the Leases written since (resource_version above the highest
// it has: every write of a Lease takes the next number of lease_seq, in
// commit order), then checks its copy with the pool's count and highest
// resource version (both from the leases_pool_version index). A write
// since shows in the highest version, a delete in the count; when either
// differs the pool is read whole. List's answer is never older than the
// database was when List was called.

// poolLeases is one pool's cached Leases.
type poolLeases struct {
	mu       sync.Mutex
	byMember map[string]*vdi.Lease
	maxRV    int64
}

// cachedList returns the Leases of pool in namespace, through the cache.
func (s *Leases) cachedList(ctx context.Context, namespace, pool string) ([]*vdi.Lease, error) {
	pc := s.poolCache(namespace, pool)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if err := pc.refresh(ctx, s.db.db, namespace, pool); err != nil {
		pc.byMember = nil // read whole next time
		return nil, fmt.Errorf("store: list leases: %w", err)
	}
	// Copies, the caller's to change, in one allocation: every claim of a
	// storm lists its pool.
	copies := make([]vdi.Lease, 0, len(pc.byMember))
	for _, l := range pc.byMember {
		c := *l
		c.Annotations = maps.Clone(l.Annotations)
		copies = append(copies, c)
	}
	out := make([]*vdi.Lease, len(copies))
	for i := range copies {
		out[i] = &copies[i]
	}
	slices.SortFunc(out, func(a, b *vdi.Lease) int { return strings.Compare(a.Member, b.Member) })
	return out, nil
}

// untaken returns the wants whose members have no Lease as far as the
// cache of their pool (brought up to date) knows; all of them when it
// cannot tell. wants are of one pool.
func (s *Leases) untaken(ctx context.Context, wants []*vdi.Lease) []*vdi.Lease {
	if s.db.db.locks == nil {
		return wants
	}
	pc := s.poolCache(wants[0].Namespace, wants[0].Pool)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if err := pc.refresh(ctx, s.db.db, wants[0].Namespace, wants[0].Pool); err != nil {
		pc.byMember = nil
		return wants
	}
	var out []*vdi.Lease
	for _, w := range wants {
		if pc.byMember[w.Member] == nil {
			out = append(out, w)
		}
	}
	return out
}

// poolCache returns the cache of pool in namespace.
func (s *Leases) poolCache(namespace, pool string) *poolLeases {
	key := namespace + "\x00" + pool
	v, ok := s.db.db.leases.Load(key)
	if !ok {
		v, _ = s.db.db.leases.LoadOrStore(key, &poolLeases{})
	}
	return v.(*poolLeases)
}

// refresh brings pc up to date with the database.
func (pc *poolLeases) refresh(ctx context.Context, c *conn, namespace, pool string) error {
	if pc.byMember != nil {
		newer, err := readLeases(ctx, c, `SELECT `+leaseColumns+` FROM leases
			WHERE namespace = ? AND pool = ? AND resource_version > ?`, namespace, pool, pc.maxRV)
		if err != nil {
			return err
		}
		for _, l := range newer {
			pc.add(l)
		}
		var count, maxRV int64
		rows, err := c.queryHot(ctx, `SELECT count(*), coalesce(max(resource_version), 0) FROM leases
			WHERE namespace = ? AND pool = ?`, namespace, pool)
		if err != nil {
			return err
		}
		if rows.Next() {
			err = rows.Scan(&count, &maxRV)
		}
		rows.Close()
		if err != nil {
			return err
		}
		if count == int64(len(pc.byMember)) && maxRV == pc.maxRV {
			return nil
		}
	}
	all, err := readLeases(ctx, c, `SELECT `+leaseColumns+` FROM leases WHERE namespace = ? AND pool = ?`, namespace, pool)
	if err != nil {
		return err
	}
	pc.byMember, pc.maxRV = make(map[string]*vdi.Lease, len(all)), 0
	for _, l := range all {
		pc.add(l)
	}
	return nil
}

// add puts l in the cache, replacing an older copy.
func (pc *poolLeases) add(l *vdi.Lease) {
	pc.byMember[l.Member] = l
	if rv, _ := strconv.ParseInt(l.ResourceVersion, 10, 64); rv > pc.maxRV {
		pc.maxRV = rv
	}
}

// readLeases runs the hot query q and scans its Leases.
func readLeases(ctx context.Context, c *conn, q string, args ...any) ([]*vdi.Lease, error) {
	rows, err := c.queryHot(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*vdi.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
