package vdi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// DefaultLeaseDuration is how long a claim lasts without renewal.
const DefaultLeaseDuration = time.Hour

// LeasePrefix prefixes a member's name to make its Lease's name.
const LeasePrefix = "corral-vdi-"

// Labels on Leases (and, as presentation, on members).
const (
	LabelPool       = "corral.dev/vdi-pool"
	LabelMember     = "corral.dev/vdi-member"
	LabelAssignedTo = "corral.dev/vdi-assigned-to"
	// LabelHolder is on a Lease its holder's HolderLabel, so that a
	// store can list one user's Leases (a login need not be a label value).
	LabelHolder = "corral.dev/vdi-holder"
)

// HolderLabel returns holder's LabelHolder value: a hash of it.
func HolderLabel(holder string) string {
	sum := sha256.Sum256([]byte(holder))
	return hex.EncodeToString(sum[:16])
}

// Lease is a claim on one member, shaped like a coordination.k8s.io/v1 Lease.
// The Lease is the truth about who holds a member; everything else is a cache.
type Lease struct {
	Namespace string
	// Member is the claimed member's name; the Lease is named LeasePrefix+Member.
	Member      string
	Pool        string
	Holder      string
	AcquireTime time.Time
	RenewTime   time.Time
	Duration    time.Duration
	// ResourceVersion is opaque; an Update or Delete carrying a stale one fails
	// with ErrConflict.
	ResourceVersion string
	// Annotations carry session facts that must survive a portal restart.
	Annotations map[string]string
}

// Expired reports whether the lease has run out at now.
func (l *Lease) Expired(now time.Time) bool {
	return !l.RenewTime.Add(l.Duration).After(now)
}

// Ref returns the claimed member's address.
func (l *Lease) Ref() Ref { return Ref{l.Namespace, l.Member} }

// Leases stores claims with compare-and-swap semantics: Create fails with
// ErrAlreadyExists when the Lease exists (first writer wins); Update and
// Delete fail with ErrConflict when ResourceVersion is stale; Get fails with
// ErrNotFound. The Leases List returns may be shared with the store and
// its other callers (Kubernetes converts each object version once: every
// claim lists its pool): read them, and change a copy (with its own
// Annotations) to write one back.
type Leases interface {
	Get(ctx context.Context, ref Ref) (*Lease, error)
	List(ctx context.Context, namespace, pool string) ([]*Lease, error)
	Create(ctx context.Context, l *Lease) (*Lease, error)
	Update(ctx context.Context, l *Lease) (*Lease, error)
	Delete(ctx context.Context, l *Lease) error
}

// LeaseBatcher is implemented by a Leases store whose writes queue one at
// a time (SQLite), where a claimant that loses a member would queue again
// for the next: CreateFirst creates the first of wants whose member has no
// Lease, in order and in one turn, and returns it; when every member has
// one it fails with ErrAlreadyExists. Each member is still won by its first
// writer, as with Create.
type LeaseBatcher interface {
	CreateFirst(ctx context.Context, wants []*Lease) (*Lease, error)
}

// reclaiming reports whether l is marked by a release or reclaim (at work,
// or left by a crash for the reclaim loop to finish): the claim is no
// longer its holder's, who neither sees it as theirs nor gets it back by
// claiming again, and it counts against nobody's limits.
func (l *Lease) reclaiming() bool { return l.Annotations[AnnotationReclaiming] != "" }

// claimOf reports whether l is login's live claim at now: hers, not run
// out, and not being released or reclaimed.
func (l *Lease) claimOf(login string, now time.Time) bool {
	return l.Holder == login && !l.Expired(now) && !l.reclaiming()
}
