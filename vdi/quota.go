package vdi

import (
	"context"
	"fmt"
	"strings"
)

// checkQuota fails with EConflict when login already holds as many
// desktops as the portal (MaxDesktopsPerUser) or pool p (its Limits) lets
// one user hold. It reads the Leases, so it holds across replicas as long
// as the caller holds login's claim lock (or writes through a store that
// checks the rules again in the write, see claim_rules.go).
func (s *Service) checkQuota(ctx context.Context, login string, p Pool) error {
	if !s.quotaApplies(p) {
		return nil
	}
	held, err := s.heldBy(ctx, login)
	if err != nil {
		return err
	}
	return s.quotaRule(p, held)
}

// quotaApplies reports whether a quota limits claims on p.
func (s *Service) quotaApplies(p Pool) bool {
	return s.maxPerUser > 0 || p.Limits.DesktopsPerUser > 0
}

// quotaRule fails with EConflict when held, the desktops a user holds, are
// as many as the portal or pool p lets one user hold.
func (s *Service) quotaRule(p Pool, held []heldDesktop) error {
	var inPool []string
	for _, d := range held {
		if d.pool == p.Namespace+"/"+p.Name {
			inPool = append(inPool, d.ref.String())
		}
	}
	names := make([]string, len(held))
	for i, d := range held {
		names[i] = d.ref.String()
	}
	switch {
	case s.maxPerUser > 0 && len(held) >= s.maxPerUser:
		return Errorf(EConflict, "Release one on the home page (/), then try again.",
			"You hold %s, the most one user may hold (%d, CORRAL_VDI_MAX_DESKTOPS_PER_USER): %s.",
			desktops(len(held)), s.maxPerUser, strings.Join(names, ", "))
	case p.Limits.DesktopsPerUser > 0 && len(inPool) >= p.Limits.DesktopsPerUser:
		return Errorf(EConflict, "Release one on the home page (/), then try again.",
			"You hold %s of pool %s, the most one user may hold (%d): %s.",
			desktops(len(inPool)), p.Name, p.Limits.DesktopsPerUser, strings.Join(inPool, ", "))
	}
	return nil
}

// heldDesktop is one desktop a user holds.
type heldDesktop struct {
	ref  Ref
	pool string // namespace/pool
}

// heldBy returns the desktops login holds in every pool, from the Leases.
func (s *Service) heldBy(ctx context.Context, login string) ([]heldDesktop, error) {
	pools, err := s.backend.Pools(ctx)
	if err != nil {
		return nil, err
	}
	var out []heldDesktop
	for _, p := range pools {
		held, err := s.held(ctx, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		for _, l := range held {
			if l.Holder == login && !l.reclaiming() {
				out = append(out, heldDesktop{ref: l.Ref(), pool: p.Namespace + "/" + p.Name})
			}
		}
	}
	return out, nil
}

func desktops(n int) string {
	if n == 1 {
		return "1 desktop"
	}
	return fmt.Sprintf("%d desktops", n)
}
