package store

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
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
	// greatest and contains are the dialect's max of two values and
	// "a contains b" test.
	greatest, contains string
}

var (
	sqliteDialect   = dialect{name: "sqlite", rowid: "rowid", greatest: "max", contains: "instr"}
	postgresDialect = dialect{name: "postgres", dollar: true, rowid: "ctid", greatest: "GREATEST", contains: "strpos"}
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
}

func (c *conn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return c.db.ExecContext(ctx, c.d.rebind(q), args...)
}

func (c *conn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return c.db.QueryContext(ctx, c.d.rebind(q), args...)
}

func (c *conn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return c.db.QueryRowContext(ctx, c.d.rebind(q), args...)
}

func (c *conn) BeginTx(ctx context.Context, opts *sql.TxOptions) (*txn, error) {
	tx, err := c.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &txn{tx: tx, d: c.d}, nil
}

func (c *conn) Close() error { return c.db.Close() }

// txn is a transaction whose queries the dialect rewrites.
type txn struct {
	tx *sql.Tx
	d  dialect
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.d.rebind(q), args...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.d.rebind(q), args...)
}

func (t *txn) Commit() error   { return t.tx.Commit() }
func (t *txn) Rollback() error { return t.tx.Rollback() }
