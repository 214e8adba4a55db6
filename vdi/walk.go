package vdi

import (
	"cmp"
	"context"
	"slices"
)

// poolClaims is a pool with its members and their live claims, as the
// listings that walk every pool read them.
type poolClaims struct {
	Pool
	members []Member
	held    map[string]*Lease // live Leases by member name
}

// walkPools reads every pool's members and live claims, in the backend's
// order, with the pools whose members are all being made fresh
// (listedPools).
func (s *Service) walkPools(ctx context.Context) ([]poolClaims, error) {
	pools, err := s.listedPools(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make([]poolClaims, 0, len(pools))
	for _, p := range pools {
		held, err := s.held(ctx, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		members, err := s.backend.Members(ctx, p.Namespace, p.Name)
		if ErrorCode(err) == ENotFound {
			// Its last member went since the pools were read, or it has
			// none while they are made fresh (listedPools): its claims
			// being reset are its members (listed).
			members, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, poolClaims{Pool: p, members: members, held: held})
	}
	return out, nil
}

// listed returns pc's members as listings show them: a member being reset
// that is gone meanwhile (a re-clone between the old VM's deletion and the
// new clone) is listed too, stopped, so that the pool never looks a member
// smaller while it is made fresh.
func (pc poolClaims) listed() []Member {
	out := pc.members
	for name, l := range pc.held {
		if !l.reclaiming() || slices.ContainsFunc(pc.members, func(m Member) bool { return m.Name == name }) {
			continue
		}
		if len(out) == len(pc.members) {
			out = slices.Clone(pc.members)
		}
		out = append(out, Member{Namespace: l.Namespace, Name: name, Pool: l.Pool, Power: PowerStopped})
	}
	if len(out) > len(pc.members) {
		slices.SortStableFunc(out, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	}
	return out
}

// statusOf counts p's claims: held are its live Leases, of which those
// marked by a release or reclaim are resetting, neither claimed nor free.
func statusOf(p Pool, held map[string]*Lease, jobs jobsByPool) PoolStatus {
	st := PoolStatus{Pool: p, Job: jobs.of(p)}
	for _, l := range held {
		if l.reclaiming() {
			st.Resetting++
		} else {
			st.Claimed++
		}
	}
	st.Free = max(p.Size-st.Claimed-st.Resetting, 0)
	return st
}
