package vdi

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
)

// A pool whose members carry it (a VM pool on Kubernetes: no pool object)
// has, while its every member is being made fresh — the one member of a
// pool of one, re-cloned after its release or by an admin's recreate —
// nothing the backend lists. The claims being reset (and the recreate
// jobs) still say it is there, and their plans (AnnotationReset, the job's
// Growth) carry its definition: the listings show it from them, with its
// members being made fresh, rather than lose it until they are back.

// listedPools returns the backend's pools and the pools whose every
// member is being made fresh (remade); jobs, when not nil (an admin's
// listing), add the pools being created and those of running recreate
// jobs.
func (s *Service) listedPools(ctx context.Context, jobs jobsByPool) ([]Pool, error) {
	pools, err := s.backend.Pools(ctx)
	if err != nil {
		return nil, err
	}
	pools = append(pools, jobs.creating(pools)...)
	ls, err := s.leases.List(ctx, "", "")
	if err != nil {
		// Only the pools being made fresh go unlisted, as they did before.
		s.log.Warn("list claims for the pools being made fresh", "err", err)
		return pools, nil
	}
	return append(pools, remade(pools, ls, jobs)...), nil
}

// remade returns the pools that listed lacks whose members are being made
// fresh: those of the reset marks on ls, read from their plans, and of
// the running recreate jobs of jobs. Each counts its members being made
// fresh as its size (a recreate job's member is not counted: no claim
// marks it, and it must not read as free). A mark with no readable plan gives a closed pool:
// nothing says whom it is for.
func remade(listed []Pool, ls []*Lease, jobs jobsByPool) []Pool {
	var out []Pool
	members := map[string]map[string]bool{}
	add := func(namespace, name, member string, plan *Pool, closed string) {
		if slices.ContainsFunc(listed, func(p Pool) bool { return p.Namespace == namespace && p.Name == name }) {
			return
		}
		key := namespace + "/" + name
		i := slices.IndexFunc(out, func(p Pool) bool { return p.Namespace == namespace && p.Name == name })
		if i < 0 {
			p := Pool{Namespace: namespace, Name: name, Closed: closed}
			if plan != nil {
				p = *plan
			}
			p.Size = 0
			out = append(out, p)
			i = len(out) - 1
			members[key] = map[string]bool{}
		}
		if member != "" && !members[key][member] {
			members[key][member] = true
			out[i].Size++
		}
	}
	for _, l := range ls {
		if !l.reclaiming() || l.Pool == "" || l.Pool == jobPool {
			continue
		}
		var g Growth
		if json.Unmarshal([]byte(l.Annotations[AnnotationReset]), &g) == nil && g.Pool.Namespace == l.Namespace && g.Pool.Name == l.Pool {
			add(l.Namespace, l.Pool, l.Member, &g.Pool, "")
			continue
		}
		add(l.Namespace, l.Pool, l.Member, nil, "its only desktops are being made fresh, and their claims carry no plan saying whom the pool is for")
	}
	for _, rec := range jobs {
		if rec.Kind == JobRecreate && rec.State == JobRunning && rec.Growth != nil {
			add(rec.Namespace, rec.Pool, "", &rec.Growth.Pool, "")
		}
	}
	slices.SortFunc(out, func(a, b Pool) int { return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
	return out
}
