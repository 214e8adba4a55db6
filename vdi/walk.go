package vdi

import "context"

// poolClaims is a pool with its members and their live claims, as the
// listings that walk every pool read them.
type poolClaims struct {
	Pool
	members []Member
	held    map[string]*Lease // live Leases by member name
}

// walkPools reads every pool's members and live claims, in the backend's
// order.
func (s *Service) walkPools(ctx context.Context) ([]poolClaims, error) {
	pools, err := s.backend.Pools(ctx)
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
		if err != nil {
			return nil, err
		}
		out = append(out, poolClaims{Pool: p, members: members, held: held})
	}
	return out, nil
}
