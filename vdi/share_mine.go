package vdi

import (
	"context"
	"slices"
	"strings"
)

// SharedWith is a desktop shared with a user: its address, who holds it,
// and the user's invitation (role, expiry).
type SharedWith struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Holder    string `json:"holder"`
	Share     Share  `json:"share"`
}

// SharedWithMe lists the desktops id is invited to now, for their home
// page, under the rules SharedDesktop applies: the pool's access rules
// unless an admin's invitation overrides them, and no pool whose watch
// policy is off.
func (s *Service) SharedWithMe(ctx context.Context, id Identity) ([]SharedWith, error) {
	if id.Token != nil { // as SharedDesktop: invitations are to people
		return nil, nil
	}
	pools, err := s.backend.Pools(ctx)
	if err != nil {
		return nil, err
	}
	now := s.now()
	var out []SharedWith
	for _, p := range pools {
		if p.Policy.Console().Watch == WatchOff {
			continue
		}
		held, err := s.held(ctx, p.Namespace, p.Name)
		if err != nil {
			return nil, err
		}
		for _, l := range held {
			for _, sh := range liveShares(l, now) {
				if sh.User == id.Login && (sh.Override || p.Allows(id)) {
					out = append(out, SharedWith{Namespace: l.Namespace, Name: l.Member, Holder: l.Holder, Share: sh})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b SharedWith) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, nil
}
