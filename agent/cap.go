package agent

import (
	"context"
	"slices"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The cap on the desktops one user's agents work in at once (Config.
// MaxDesktops), across every token of the user and every replica: the
// desktops are counted from their claims (the agent's name on each), so
// two claims at once on two replicas may both pass the first count; the
// count after the claim then releases the newer ones over the cap.

// agentDesktops returns the desktops login holds that an agent works
// in, oldest claim first, and whether login holds one of pool ns/pool
// (which a claim gives again, not anew).
func (s *Seat) agentDesktops(ctx context.Context, id vdi.Identity, ns, pool string) ([]vdi.Desktop, bool, error) {
	person := id
	person.Token = nil // every pool of the user, not just the token's
	ds, err := s.cfg.Desktops.Desktops(ctx, person, false)
	if err != nil {
		return nil, false, err
	}
	var out []vdi.Desktop
	held := false
	for _, d := range ds {
		held = held || d.Namespace == ns && d.Pool == pool
		if d.Agent != "" {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b vdi.Desktop) int {
		if c := a.ClaimedAt.Compare(b.ClaimedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, held, nil
}

// errAgentCap refuses a claim over the cap.
func (s *Seat) errAgentCap(id vdi.Identity, ds []vdi.Desktop) error {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Namespace + "/" + d.Name
	}
	return vdi.Errorf(vdi.EFull, "Release one with release_desktop first, or ask an admin to raise -max-agent-desktops-per-user.",
		"%s's agents already work in %d desktops, the most they may at once (%s): release one first, or ask an admin to raise the cap", id.Login, s.cfg.MaxDesktops, strings.Join(names, ", "))
}

// beforeClaim refuses a claim of a new desktop of ns/pool over the cap;
// held says the user holds one there already (the claim gives it again).
func (s *Seat) beforeClaim(ctx context.Context, id vdi.Identity, ns, pool string) (held bool, err error) {
	if s.cfg.MaxDesktops <= 0 {
		return false, nil
	}
	ds, held, err := s.agentDesktops(ctx, id, ns, pool)
	if err != nil || held {
		return held, err
	}
	if len(ds) >= s.cfg.MaxDesktops {
		return false, s.errAgentCap(id, ds)
	}
	return false, nil
}

// afterClaim counts again once the claim of ref is won and marked: when
// claims at once took the user's agents over the cap, the newest go back.
func (s *Seat) afterClaim(ctx context.Context, id vdi.Identity, ref vdi.Ref) error {
	if s.cfg.MaxDesktops <= 0 {
		return nil
	}
	ds, _, err := s.agentDesktops(ctx, id, "", "")
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(ds, func(d vdi.Desktop) bool { return d.Namespace == ref.Namespace && d.Name == ref.Name }); i < s.cfg.MaxDesktops {
		return nil
	}
	if err := s.cfg.Desktops.Release(ctx, id, ref, "over the agent cap"); err != nil {
		s.cfg.Log.Warn("a claim over the agent cap was not released", "desktop", ref, "err", err)
	}
	return s.errAgentCap(id, ds[:s.cfg.MaxDesktops])
}
