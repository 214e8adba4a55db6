package vdi

import "context"

// DefinitionRepairer is implemented by backends whose pools' definitions
// (access, limits, policy) are carried by each member, so that a member
// can lack it: RepairDefinitions writes its pool's definition on every
// member of a defined pool that lacks it and returns how many it wrote. A
// member that lacks it is Closed until then; a pool whose members disagree
// is Closed until an admin sets its definition again.
type DefinitionRepairer interface {
	RepairDefinitions(ctx context.Context) (int, error)
}

// repairDefinitions runs the backend's DefinitionRepairer, if any, and
// logs what it did.
func (s *Service) repairDefinitions(ctx context.Context) {
	r, ok := s.backend.(DefinitionRepairer)
	if !ok {
		return
	}
	n, err := r.RepairDefinitions(ctx)
	if n > 0 {
		s.log.Info("wrote pool definitions on members that lacked them", "members", n)
	}
	if err != nil && ctx.Err() == nil {
		s.log.Error("repair pool definitions", "err", err)
	}
}
