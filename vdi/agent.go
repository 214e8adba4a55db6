package vdi

import (
	"context"
	"time"
)

// AnnotationAgent names, on a claim, the agent that works in the desktop
// ("bot:alice/test-runner"), so that the dashboard and the home page say
// a bot holds it.
const AnnotationAgent = "corral.dev/vdi-agent"

// MarkAgent notes on id's claim of ref that id's agent (its token) works
// in it; a claim it already names is left as it is.
func (s *Service) MarkAgent(ctx context.Context, id Identity, ref Ref) error {
	agent := id.Agent()
	if agent == "" {
		return nil
	}
	l, err := s.leases.Get(ctx, ref)
	if err == nil && l.Annotations[AnnotationAgent] == agent {
		return nil
	}
	return s.updateClaim(ctx, ref, id.Login, func(l *Lease, _ time.Time) error {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AnnotationAgent] = agent
		return nil
	})
}
