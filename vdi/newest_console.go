package vdi

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// annotationNewest prefixes the annotation that names the holder's newest
// console of a protocol (+ the protocol): the one that stays when the
// holder opens the desktop again in another tab, on any replica.
const annotationNewest = "corral.dev/vdi-newest-"

// ConsoleStamp orders a holder's consoles of a desktop by when they were
// opened (the request's arrival), the same on every replica: the time in
// nanoseconds, zero-padded, then the console's id, so that two opened in
// the same nanosecond still have one order (NewerConsole). Replicas'
// clocks are to agree (NTP) within the time between two tabs they should
// tell apart.
func ConsoleStamp(opened time.Time, id string) string {
	return fmt.Sprintf("%020d.%s", opened.UnixNano(), id)
}

// NewerConsole reports whether the console stamped a (ConsoleStamp) is
// newer than b's. A value that is no stamp (none, or an older portal's
// session id) is older than any stamp.
func NewerConsole(a, b string) bool {
	return stamped(a) > stamped(b)
}

// stamped returns s if it is a ConsoleStamp, else "".
func stamped(s string) string {
	if len(s) < 22 || s[20] != '.' {
		return ""
	}
	for _, c := range s[:20] {
		if c < '0' || c > '9' {
			return ""
		}
	}
	return s
}

// errNotNewer stops a TakeConsole whose console is not newer than the
// one the claim records: nothing to write.
var errNotNewer = errors.New("vdi: an older console than the claim's newest")

// TakeConsole records console as the holder's newest console p of ref,
// so that older ones on every replica give way to it (NewestConsole),
// unless the claim records a newer one (NewerConsole: console is a
// ConsoleStamp), and the claim is compared and written by compare-and-swap, so of two
// consoles opened at almost the same moment on two replicas exactly the
// newer is recorded, whichever write lands last. A claim that is gone is
// not an error.
func (s *Service) TakeConsole(ctx context.Context, ref Ref, p Protocol, console string) error {
	err := s.updateClaim(ctx, ref, "", func(l *Lease, _ time.Time) error {
		if !NewerConsole(console, l.Annotations[annotationNewest+string(p)]) {
			return errNotNewer
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[annotationNewest+string(p)] = console
		return nil
	})
	if errors.Is(err, errNotNewer) || (ErrorCode(err) == EConflict && errors.Is(err, errClaimGone)) {
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
