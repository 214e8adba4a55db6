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
// A row beyond the bound is dropped, counted and logged.
type Buffer struct {
	db  *DB
	log *slog.Logger
	max int

	mu      sync.Mutex
	queue   []pending
	dropped int64
	lastErr error
	wake    chan struct{}
}

// pending is a write that waits for the database.
type pending struct {
	what  string
	write func(ctx context.Context) error
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
	return &Buffer{db: db, max: max, log: log, wake: make(chan struct{}, 1)}
}

// Record implements vdi.AuditLog, stamping the event now.
func (b *Buffer) Record(ctx context.Context, e vdi.AuditEvent) error {
	at, key := b.db.Now(), rand.Text() // the key: a retry after a broken connection writes once
	return b.write(ctx, "audit "+e.Action, func(ctx context.Context) error { return b.db.RecordAt(ctx, at, key, e) })
}

// OpenSession records a new session.
func (b *Buffer) OpenSession(ctx context.Context, s Session) error {
	if s.OpenedAt.IsZero() {
		s.OpenedAt = b.db.Now()
	}
	return b.write(ctx, "session "+s.ID+" opened", func(ctx context.Context) error { return b.db.OpenSession(ctx, s) })
}

// CloseSession records how a session ended.
func (b *Buffer) CloseSession(ctx context.Context, id string, bytesIn, bytesOut int64, reason string, lastInput time.Time) error {
	at := b.db.Now()
	return b.write(ctx, "session "+id+" closed", func(ctx context.Context) error {
		return b.db.CloseSessionAt(ctx, at, id, bytesIn, bytesOut, reason, lastInput)
	})
}

// write writes at once when nothing waits, else (or when the database
// does not answer) queues the write behind what waits, keeping the order.
func (b *Buffer) write(ctx context.Context, what string, w func(context.Context) error) error {
	b.mu.Lock()
	queued := len(b.queue) > 0
	b.mu.Unlock()
	if !queued {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		err := w(wctx)
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
	if len(b.queue) >= b.max {
		b.queue = b.queue[1:]
		b.dropped++
		if b.dropped == 1 || b.dropped%1000 == 0 {
			b.log.Error("history database unreachable and its buffer full: dropping the oldest rows", "dropped", b.dropped, "kept", b.max)
		}
	}
	b.queue = append(b.queue, pending{what: what, write: w})
	select {
	case b.wake <- struct{}{}:
	default:
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
		b.queue = b.queue[1:]
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
	case err != nil:
		return fmt.Sprintf("The history database does not answer (%v): %d rows wait in memory, %d dropped. Claims and consoles keep working.", err, waiting, dropped)
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
