package vdi

import (
	"context"
	"errors"
	"time"
)

// annotationNewest prefixes the annotation that names the holder's newest
// console of a protocol (+ the protocol): the one that stays when the
// holder opens the desktop again in another tab, on any replica.
const annotationNewest = "corral.dev/vdi-newest-"

// TakeConsole records console (an opaque id, e.g. the session's) as the
// holder's newest console p of ref, so that older ones on every replica
// give way to it (NewestConsole). A claim that is gone is not an error.
func (s *Service) TakeConsole(ctx context.Context, ref Ref, p Protocol, console string) error {
	err := s.updateClaim(ctx, ref, "", func(l *Lease, _ time.Time) error {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[annotationNewest+string(p)] = console
		return nil
	})
	if ErrorCode(err) == EConflict && errors.Is(err, errClaimGone) {
		return nil
	}
	return err
}

// NewestConsole returns the holder's newest console p of ref as
// TakeConsole recorded it; empty when none was, or the claim is gone.
func (s *Service) NewestConsole(ctx context.Context, ref Ref, p Protocol) (string, error) {
	l, err := s.leases.Get(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	return l.Annotations[annotationNewest+string(p)], nil
}
