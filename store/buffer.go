package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Buffer writes history and audit rows to the database, and keeps the
// ones it cannot write while the database does not answer (in memory, in
// order, up to a bound), writing them when it answers again: a lost
// database never fails a claim or a console, and loses nothing silently.
// Beyond the bound, routine rows (session history) go first, then the
// users' own audit rows; admin and security events (ProtectedActions, and
// every row written for a request Protect marked) are never shed:
// AuditRoom says when one more could not be kept, so that the admin
// action is refused rather than done unrecorded. A dropped row is
// counted and logged.
type Buffer struct {
	db  *DB
	log *slog.Logger
	max int

	mu        sync.Mutex
	queue     []pending
	kept      [numClasses]int // rows waiting, per class
	seq       uint64
	dropped   int64
	lost      int64 // protected rows dropped beyond the slack
	lastErr   error
	wake      chan struct{}
	revokes   map[string]*revocation // sign-outs waiting, by login
	protected map[string]bool
}

// rowClass orders the rows by what may be shed first.
type rowClass int

const (
	classRoutine   rowClass = iota // session history
	classUser                      // a user's own audit row (claim, release, ...)
	classProtected                 // admin and security events
	numClasses
)

// pending is a write that waits for the database.
type pending struct {
	what  string
	class rowClass
	write func(ctx context.Context) error
	seq   uint64 // its place in the queue, unique
}

var _ vdi.AuditLog = (*Buffer)(nil)

// DefaultBufferRows bounds the rows a Buffer keeps.
const DefaultBufferRows = 10000

// writeTimeout bounds one write: a database that does not answer in it is
// taken for gone, and the row waits.
const writeTimeout = 3 * time.Second

// NewBuffer returns a Buffer over db keeping at most max rows (0: the
// default); Run writes what it keeps.
func NewBuffer(db *DB, max int, log *slog.Logger) *Buffer {
	if max <= 0 {
		max = DefaultBufferRows
	}
	if log == nil {
		log = slog.Default()
	}
	b := &Buffer{db: db, max: max, log: log, wake: make(chan struct{}, 1), revokes: map[string]*revocation{}, protected: map[string]bool{}}
	for _, a := range ProtectedActions {
		b.protected[a] = true
	}
	// Anyone may sign in as often as they like (by name, where that is
	// on): their sign-ins must not crowd admins out of the buffer.
	delete(b.protected, "sign-in")
	return b
}

// Record implements vdi.AuditLog, stamping the event now. The row is
// protected when its action is one of ProtectedActions or ctx is an
// admin's request (Protect).
func (b *Buffer) Record(ctx context.Context, e vdi.AuditEvent) error {
	at, key := b.db.Now(), rand.Text() // the key: a retry after a broken connection writes once
	class := classUser
	if b.protected[e.Action] || vdi.Protected(ctx) {
		class = classProtected
	}
	return b.write(ctx, pending{what: "audit " + e.Action, class: class,
		write: func(ctx context.Context) error { return b.db.RecordAt(ctx, at, key, e) }})
}

// OpenSession records a new session.
func (b *Buffer) OpenSession(ctx context.Context, s Session) error {
	if s.OpenedAt.IsZero() {
		s.OpenedAt = b.db.Now()
	}
	return b.write(ctx, pending{what: "session " + s.ID + " opened", class: classRoutine,
		write: func(ctx context.Context) error { return b.db.OpenSession(ctx, s) }})
}

// CloseSession records how a session ended.
func (b *Buffer) CloseSession(ctx context.Context, id string, bytesIn, bytesOut int64, reason string, lastInput time.Time) error {
	at := b.db.Now()
	return b.write(ctx, pending{what: "session " + id + " closed", class: classRoutine, write: func(ctx context.Context) error {
		return b.db.CloseSessionAt(ctx, at, id, bytesIn, bytesOut, reason, lastInput)
	}})
}

// write writes at once when nothing waits, else (or when the database
// does not answer) queues the write behind what waits, keeping the order.
func (b *Buffer) write(ctx context.Context, p pending) error {
	b.mu.Lock()
	queued := len(b.queue) > 0
	b.mu.Unlock()
	if !queued {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		err := p.write(wctx)
		cancel()
		if err == nil {
			return nil
		}
		if !transient(err) {
			return err // the row itself is wrong: waiting will not help
		}
		b.fail(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.enqueue(p)
}

// enqueue keeps p behind what waits, shedding the oldest row of the
// lowest class first when the buffer is full. b.mu is held.
func (b *Buffer) enqueue(p pending) error {
	if len(b.queue) >= b.max && !b.shed(p.class) {
		if p.class < classProtected {
			b.drop(p.what) // only rows as precious as p wait: p goes
			return nil
		}
		if len(b.queue) >= b.max+b.max/10 { // the slack for admin actions already under way
			b.lost++
			b.log.Error("history database unreachable and its buffer full of admin and security rows: one is lost", "row", p.what, "lost", b.lost)
			return ErrAuditFull
		}
	}
	b.seq++
	p.seq = b.seq
	b.queue = append(b.queue, p)
	b.kept[p.class]++
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return nil
}

// shed drops the oldest waiting row of the lowest class present, if that
// class is not above c, and reports whether it dropped one. b.mu is held.
func (b *Buffer) shed(c rowClass) bool {
	for class := classRoutine; class <= c && class < classProtected; class++ {
		if b.kept[class] == 0 {
			continue
		}
		for i, q := range b.queue {
			if q.class == class {
				b.queue = append(b.queue[:i], b.queue[i+1:]...)
				b.kept[class]--
				b.drop(q.what)
				return true
			}
		}
	}
	return false
}

// drop counts and logs a row dropped. b.mu is held.
func (b *Buffer) drop(what string) {
	b.dropped++
	if b.dropped == 1 || b.dropped%1000 == 0 {
		b.log.Error("history database unreachable and its buffer full: dropping routine rows first, never admin or security events",
			"dropped", b.dropped, "kept", b.max, "row", what)
	}
}

// ErrAuditFull is the refusal of an admin or security row the buffer
// cannot keep.
var ErrAuditFull = vdi.Errorf(vdi.EUnavailable, "Try again once the history database answers (see /readyz); the portal keeps trying to write what waits.",
	"The audit log cannot keep this action: the history database does not answer and the rows waiting for it are all admin and security events.")

// AuditRoom returns ErrAuditFull when the buffer could not keep one more
// admin or security row, so that the action is refused before it is done
// unrecorded; nil when it could.
func (b *Buffer) AuditRoom() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kept[classProtected] >= b.max {
		return ErrAuditFull
	}
	return nil
}

// fail notes that the database stopped answering, logging it once.
func (b *Buffer) fail(err error) {
	b.mu.Lock()
	first := b.lastErr == nil
	b.lastErr = err
	b.mu.Unlock()
	if first {
		b.log.Error("history database unreachable: keeping history and audit rows in memory until it answers", "err", err, "bound", b.max)
	}
}

// Run writes the kept rows, oldest first, whenever the database answers,
// until ctx ends.
func (b *Buffer) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.wake:
		}
		b.flush(ctx)
	}
}

// flush writes kept rows until one fails or none is left.
func (b *Buffer) flush(ctx context.Context) {
	for ctx.Err() == nil {
		b.mu.Lock()
		if len(b.queue) == 0 {
			recovered := b.lastErr != nil
			b.lastErr = nil
			b.mu.Unlock()
			if recovered {
				b.log.Info("history database answers again: every kept row is written")
			}
			return
		}
		p := b.queue[0]
		b.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		err := p.write(wctx)
		cancel()
		if err != nil && transient(err) {
			b.fail(err)
			return
		}
		if err != nil {
			b.log.Error("kept history row refused by the database; dropped", "row", p.what, "err", err)
		}
		b.mu.Lock()
		if len(b.queue) > 0 && b.queue[0].seq == p.seq { // shedding may have taken it meanwhile
			b.queue = b.queue[1:]
			b.kept[p.class]--
		}
		b.mu.Unlock()
	}
}

// Status says whether the database answers: how many rows wait for it,
// how many were dropped, and the last error while it does not.
func (b *Buffer) Status() (waiting int, dropped int64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue), b.dropped, b.lastErr
}

// StatusText says the same in words for pages; empty when all is well.
func (b *Buffer) StatusText() string {
	if err := b.db.FileGone(); err != nil {
		return fileGoneText(err)
	}
	waiting, dropped, err := b.Status()
	switch {
	case err != nil && b.AuditRoom() != nil:
		return fmt.Sprintf("The history database does not answer (%v): %d rows wait in memory, %d dropped, and there is no room for more admin rows: admin actions are refused until it answers.", err, waiting, dropped)
	case err != nil:
		return fmt.Sprintf("The history database does not answer (%v): %d rows wait in memory, %d dropped (routine rows first; admin and security events are kept). Claims and consoles keep working.", err, waiting, dropped)
	case dropped > 0:
		return fmt.Sprintf("%d history rows were dropped while the database did not answer.", dropped)
	}
	return ""
}

// transient reports whether err is the database not answering (worth
// waiting for) rather than a refusal of the row itself.
func transient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "53", "57", "58": // connection, resources, operator intervention, system
			return true
		}
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		const sqliteConstraint = 19
		return se.Code()&0xff != sqliteConstraint
	}
	return true // the network, a timeout, a closed pool
}
