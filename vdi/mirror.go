package vdi

import (
	"context"
	"errors"
	"time"
)

// ClaimMirror is implemented by backends that show a claim on the member
// itself for other tools: on Kubernetes the VM's corral.dev/vdi-assigned-to
// label and corral.dev/vdi-claimed-at annotation. It is presentation; the
// Lease stays the truth. An empty holder clears the mirror.
type ClaimMirror interface {
	MirrorClaim(ctx context.Context, ref Ref, holder string, claimedAt time.Time) error
}

// mirrorTimeout bounds one mirror write made after a claim.
const mirrorTimeout = 30 * time.Second

// mirror shows l on its member when the backend can, after the claim has
// answered: the mirror is presentation (on Kubernetes a VM patch through
// KubeVirt's webhooks), so a claim never waits for it nor fails with it.
// One that fails is set right by the reclaim loop (RepairMirrors).
func (s *Service) mirror(l *Lease) { s.queueMirror(l.Ref(), l.Holder, l.AcquireTime) }

// unmirror clears ref's mirror after a release, as mirror writes it.
func (s *Service) unmirror(ref Ref) { s.queueMirror(ref, "", time.Time{}) }

// queueMirror writes ref's mirror in the background, after the writes
// queued for ref before it: a release's clear never lands before the
// claim's mark it follows.
func (s *Service) queueMirror(ref Ref, holder string, at time.Time) {
	cm, ok := s.backend.(ClaimMirror)
	if !ok {
		return
	}
	done := make(chan struct{})
	s.mirrorMu.Lock()
	if s.mirrorTail == nil {
		s.mirrorTail = map[Ref]chan struct{}{}
	}
	prev := s.mirrorTail[ref]
	s.mirrorTail[ref] = done
	s.mirrorMu.Unlock()
	go func() {
		defer func() {
			s.mirrorMu.Lock()
			if s.mirrorTail[ref] == done {
				delete(s.mirrorTail, ref)
			}
			s.mirrorMu.Unlock()
			close(done)
		}()
		if prev != nil {
			<-prev
		}
		ctx, cancel := context.WithTimeout(context.Background(), mirrorTimeout)
		defer cancel()
		if err := cm.MirrorClaim(ctx, ref, holder, at); err != nil && ErrorCode(err) != ENotFound {
			s.log.Warn("claim mirror not written (the reclaim loop tries again)", "desktop", ref, "holder", holder, "err", err)
		}
	}()
}

// RepairMirrors makes every member's mirror (Member.Shown) say what its
// Lease says: the holder of a live claim, nobody for a free member. It
// returns how many it wrote.
func (s *Service) RepairMirrors(ctx context.Context) (int, error) {
	cm, ok := s.backend.(ClaimMirror)
	if !ok {
		return 0, nil
	}
	pools, err := s.walkPools(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, p := range pools {
		if p.Kind == KindCT {
			continue // a CT member's Pod is made afresh too often to carry one
		}
		for _, m := range p.members {
			want, at := "", time.Time{}
			if l := p.held[m.Name]; l != nil {
				want, at = l.Holder, l.AcquireTime
			}
			if m.Shown == want {
				continue
			}
			if err := cm.MirrorClaim(ctx, m.Ref(), want, at); err != nil && ErrorCode(err) != ENotFound {
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}
