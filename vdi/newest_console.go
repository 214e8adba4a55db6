package vdi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// annotationNewest prefixes the annotation that names the holder's newest
// console of a protocol (+ the protocol): the one that stays when the
// holder opens the desktop again in another tab, on any replica.
const annotationNewest = "corral.dev/vdi-newest-"

// A console's stamp orders the holder's consoles of a desktop by when
// their replica recorded them on the claim, the same on every replica and
// with no clock involved: a counter kept on the claim (one more than the
// stamp it replaces, written by compare-and-swap), zero-padded to 20
// digits, then the console's id. Portals before the counter stamped the
// request's time in nanoseconds in the same form; a counter taken from
// such a stamp goes on from it, so the two order alike during an upgrade.

// stampDigits is the width of a stamp's counter.
const stampDigits = 20

// NewerConsole reports whether the console stamped a (TakeConsole) is
// newer than b's. A value that is no stamp (none, or an older portal's
// session id) is older than any stamp.
func NewerConsole(a, b string) bool {
	return stamped(a) > stamped(b)
}

// stamped returns s if it is a stamp, else "".
func stamped(s string) string {
	if len(s) < stampDigits+2 || s[stampDigits] != '.' {
		return ""
	}
	for _, c := range s[:stampDigits] {
		if c < '0' || c > '9' {
			return ""
		}
	}
	return s
}

// nextStamp returns the stamp of console id recorded after prev.
func nextStamp(prev, id string) string {
	var n uint64 // none before
	if s := stamped(prev); s != "" {
		n, _ = strconv.ParseUint(s[:stampDigits], 10, 64)
	}
	return fmt.Sprintf("%0*d.%s", stampDigits, n+1, id)
}

// TakeConsole records console id as the holder's newest console p of ref,
// so that older ones on every replica give way to it (NewestConsole), and
// returns its stamp (see NewerConsole). The claim is read and written by
// compare-and-swap: of two consoles opened at almost the same moment on
// two replicas, the one whose write lands last is the newer, on every
// replica alike, whatever their clocks say. A claim that is gone is not
// an error: the stamp is then empty.
func (s *Service) TakeConsole(ctx context.Context, ref Ref, p Protocol, id string) (string, error) {
	var stamp string
	err := s.updateClaim(ctx, ref, "", func(l *Lease, _ time.Time) error {
		stamp = nextStamp(l.Annotations[annotationNewest+string(p)], id)
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[annotationNewest+string(p)] = stamp
		return nil
	})
	if ErrorCode(err) == EConflict && errors.Is(err, errClaimGone) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	return stamp, nil
}

// NewestConsole returns the stamp of the holder's newest console p of ref
// as TakeConsole recorded it; empty when none was, or the claim is gone.
func (s *Service) NewestConsole(ctx context.Context, ref Ref, p Protocol) (string, error) {
	l, err := s.leases.Get(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	return l.Annotations[annotationNewest+string(p)], nil
}
