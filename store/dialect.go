package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"
)

// dialect is what differs between the databases the store speaks: SQLite
// (the embedded default) and PostgreSQL (CORRAL_VDI_DATABASE_URL). Queries
// are written once, with ? placeholders and the few functions below.
type dialect struct {
	name string
	// dollar numbers placeholders $1, $2, ... (PostgreSQL) instead of ?.
	dollar bool
	// rowid names a column that tells rows apart in any table.
	rowid string
	// greatest, least and contains are the dialect's max and min of two
	// values and "a contains b" test.
	greatest, least, contains string
}

var (
	sqliteDialect   = dialect{name: "sqlite", rowid: "rowid", greatest: "max", least: "min", contains: "instr"}
	postgresDialect = dialect{name: "postgres", dollar: true, rowid: "ctid", greatest: "GREATEST", least: "LEAST", contains: "strpos"}
)

// rebind rewrites q's ? placeholders for the dialect; ? inside quotes
// stays.
func (d dialect) rebind(q string) string {
	if !d.dollar || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n, quoted := 0, false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// conn is a database handle whose queries the dialect rewrites: the store
// code calls it as it would call *sql.DB.
type conn struct {
	db *sql.DB
	d  dialect
	// locks queues SQLite writers (see sqlite_locks.go); nil for
	// PostgreSQL, which needs no queue.
	locks *lockFile
	// stmts holds the statements of hot queries (see queryHot), prepared
	// once rather than parsed on every call.
	stmts sync.Map // string -> *sql.Stmt
	// leases caches pools' Leases on SQLite (see leases_cache.go).
	leases sync.Map // namespace + "\x00" + pool -> *poolLeases
}

// queryHot is QueryContext for a query run on every claim: its statement is
// prepared once and kept. q must be one of a fixed set of strings.
func (c *conn) queryHot(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := c.hot(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// hot returns the kept statement of q, preparing it the first time.
func (c *conn) hot(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := c.stmts.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	prepared, err := c.db.PrepareContext(ctx, c.d.rebind(q))
	if err != nil {
		return nil, err
	}
	st, loaded := c.stmts.LoadOrStore(q, prepared)
	if loaded {
		prepared.Close()
	}
	return st.(*sql.Stmt), nil
}

func (c *conn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	unlock, err := c.locks.lockWriter(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return c.db.ExecContext(ctx, c.d.rebind(q), args...)
}

func (c *conn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.db.QueryContext(ctx, c.d.rebind(q), args...)
}

func (c *conn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return c.db.QueryRowContext(ctx, c.d.rebind(q), args...)
}

// BeginTx begins a transaction; on SQLite (BEGIN IMMEDIATE) it is a write,
// so it queues for the write lock until Commit or Rollback.
func (c *conn) BeginTx(ctx context.Context, opts *sql.TxOptions) (*txn, error) {
	return c.beginUnless(ctx, opts, nil)
}

// errLost is beginUnless's answer when its check says the write is lost.
var errLost = errors.New("store: lost before writing")

// beginUnless is BeginTx, except that once its turn to write has come it
// first asks lost (when set) whether the write is already lost, e.g. an
// insert of a row that exists, and then returns errLost rather than begin:
// a claimant that lost a race learns it without a transaction. lost reads
// the database; on SQLite, with the write lock queued for, what it reads
// is what the transaction would see.
func (c *conn) beginUnless(ctx context.Context, opts *sql.TxOptions, lost func() bool) (*txn, error) {
	unlock, err := c.locks.lockWriter(ctx)
	if err != nil {
		return nil, err
	}
	if lost != nil && lost() {
		unlock()
		return nil, errLost
	}
	tx, err := c.db.BeginTx(ctx, opts)
	if err != nil {
		unlock()
		return nil, err
	}
	return &txn{tx: tx, d: c.d, c: c, unlock: unlock}, nil
}

func (c *conn) Close() error {
	c.stmts.Range(func(_, st any) bool { st.(*sql.Stmt).Close(); return true })
	err := c.db.Close()
	c.locks.close()
	return err
}

// txn is a transaction whose queries the dialect rewrites.
type txn struct {
	tx     *sql.Tx
	d      dialect
	c      *conn
	unlock func() // lets the next writer in; safe to call twice
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.d.rebind(q), args...)
}

// execHot is ExecContext with q's kept statement (see queryHot), on
// SQLite. Preparing it the first time takes a connection besides the
// transaction's: SQLite's writers queue before they hold one, but
// PostgreSQL's transactions could all hold one and wait on each other's
// row locks, so there it is plain ExecContext.
func (t *txn) execHot(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if t.c.locks == nil {
		return t.ExecContext(ctx, q, args...)
	}
	st, err := t.c.hot(ctx, q)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

// queryRowHot is QueryRowContext with q's kept statement (see execHot).
func (t *txn) queryRowHot(ctx context.Context, q string, args ...any) *sql.Row {
	if t.c.locks == nil {
		return t.QueryRowContext(ctx, q, args...)
	}
	st, err := t.c.hot(ctx, q)
	if err != nil {
		return t.tx.QueryRowContext(ctx, t.d.rebind(q), args...) // reports the same error
	}
	return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.d.rebind(q), args...)
}

func (t *txn) Commit() error {
	defer t.unlock()
	return t.tx.Commit()
}

func (t *txn) Rollback() error {
	defer t.unlock()
	return t.tx.Rollback()
}
