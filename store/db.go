// Package store keeps the portal's database: session history and the audit
// log, sign-outs and prunings, plus, in local mode, claims (Leases) and
// local pools. It speaks SQLite (a file in the data dir, the embedded
// default) or PostgreSQL (CORRAL_VDI_DATABASE_URL: shared by replicas,
// surviving pods) with the same queries. It knows SQL, not HTTP.
package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

// Each dialect has its own migrations, named alike: SQLite's in
// migrations/, PostgreSQL's in migrations/postgres/ (a test checks that
// both have every step). Steps run in name order; each has a number of its
// own (a test checks that), the next free one for a new step.
//
//go:embed migrations/*.sql migrations/postgres/*.sql
var migrations embed.FS

// DB is an open portal database.
type DB struct {
	db *conn
	// Now returns the current time; tests replace it.
	Now func() time.Time
	// file is the SQLite file, watched for being deleted; nil for
	// PostgreSQL.
	file *dbFile
}

// Open opens (creating if needed) the SQLite database at path and applies
// any migrations it has not seen yet. WAL and foreign keys are on.
func Open(ctx context.Context, path string) (*DB, error) {
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	sqldb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// Writers queue in the portal (sqlite_locks.go), so a few connections
	// serve any number of claimants; keeping them open spares each burst
	// the cost of opening new ones.
	sqldb.SetMaxOpenConns(sqliteConns)
	sqldb.SetMaxIdleConns(sqliteConns)
	db, err := open(ctx, &conn{db: sqldb, d: sqliteDialect, locks: openLockFile(path)}, path)
	if err == nil {
		db.file = watchFile(path)
	}
	return db, err
}

// sqliteConns bounds a SQLite handle's connections. Reads run in parallel
// (WAL), writes one at a time.
const sqliteConns = 32

// OpenPostgres connects to the PostgreSQL database at url (postgres://...)
// with password, when not empty, instead of the URL's, and applies the
// migrations it has not seen yet, one replica at a time.
func OpenPostgres(ctx context.Context, url, password string) (*DB, error) {
	cfg, err := pgxConfig(url, password)
	if err != nil {
		return nil, err
	}
	sqldb := openPgx(cfg)
	sqldb.SetMaxOpenConns(16)
	// Kept open, not the 2 database/sql keeps by default: in a claim storm
	// the others were closed and opened again, each a new server process
	// and a SCRAM exchange (an eighth of a portal's CPU, profiled).
	sqldb.SetMaxIdleConns(16)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sqldb.PingContext(ctx); err != nil {
		sqldb.Close()
		return nil, fmt.Errorf("store: connect to PostgreSQL at %s: %w (check CORRAL_VDI_DATABASE_URL, the password and that the server is up)", Redact(url), pgHint(err))
	}
	return open(ctx, &conn{db: sqldb, d: postgresDialect}, Redact(url))
}

func open(ctx context.Context, c *conn, where string) (*DB, error) {
	db := &DB{db: c, Now: time.Now}
	if err := db.migrate(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("store: open %s: %w", where, err)
	}
	return db, nil
}

// Dialect names the database: "sqlite" or "postgres".
func (db *DB) Dialect() string { return db.db.d.name }

// Ping reports, as a nil error, whether the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.db.db.PingContext(ctx) }

// Close closes the database.
func (db *DB) Close() error { return db.db.Close() }

// migrationLock is the PostgreSQL advisory lock replicas take to migrate
// one at a time.
const migrationLock = 0x636f7272616c // "corral"

func (db *DB) migrate(ctx context.Context) error {
	const table = `CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY)`
	var err error
	if db.db.d.dollar {
		// PostgreSQL: replicas creating it at once collide in its catalog.
		err = db.locked(ctx, func(tx *txn) error { _, err := tx.ExecContext(ctx, table); return err })
	} else {
		// SQLite: outside a transaction, so that portals opening a new
		// file at once wait on its busy timeout rather than fail.
		_, err = db.db.ExecContext(ctx, table)
	}
	if err != nil {
		return fmt.Errorf("migrations table: %w", pgHint(err))
	}
	dir := "migrations"
	if db.db.d.dollar {
		dir = "migrations/postgres"
	}
	names, err := fs.Glob(migrations, dir+"/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	if err := db.checkNotNewer(ctx, names); err != nil {
		return err
	}
	for _, name := range names {
		if err := db.migrateFile(ctx, name); err != nil {
			return fmt.Errorf("migration %s: %w", path.Base(name), pgHint(err))
		}
	}
	return nil
}

// checkNotNewer refuses a database that a newer portal migrated: its
// schema has steps this binary does not know.
func (db *DB) checkNotNewer(ctx context.Context, known []string) error {
	rows, err := db.db.QueryContext(ctx, `SELECT name FROM migrations`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var unknown []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return err
		}
		if !slices.ContainsFunc(known, func(k string) bool { return migrationName(k) == n }) {
			unknown = append(unknown, n)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("the database's schema is newer than this portal (it has %s, which this binary does not know): run the newer portal, or restore a backup made for this one",
			strings.Join(unknown, ", "))
	}
	return nil
}

// migrationName is how the migrations table names a step: its file under
// migrations/, whatever the dialect (as SQLite databases always had it).
// Steps renumbered so that no two share a prefix keep the name they were
// recorded under, so databases migrated before the renumbering (and
// portals from before it, reading a newer database) see the same steps.
func migrationName(file string) string {
	base := path.Base(file)
	if old, ok := recordedAs[base]; ok {
		base = old
	}
	return "migrations/" + base
}

// recordedAs maps a renumbered migration file to the name databases
// recorded it under before.
var recordedAs = map[string]string{
	"0005_trust_boundaries.sql": "0004_trust_boundaries.sql",
	"0006_audit_key.sql":        "0005_audit_key.sql",
	"0007_pool_standby.sql":     "0006_pool_standby.sql",
	"0008_recordings.sql":       "0006_recordings.sql",
	"0009_lease_versions.sql":   "0007_lease_versions.sql",
}

// locked runs f in a transaction that, on PostgreSQL, holds the migration
// lock: replicas starting together migrate one at a time, the later ones
// finding each step done.
func (db *DB) locked(ctx context.Context, f func(*txn) error) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if db.db.d.dollar {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, migrationLock); err != nil {
			return err
		}
	}
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (db *DB) migrateFile(ctx context.Context, name string) error {
	return db.locked(ctx, func(tx *txn) error { return db.migrateStep(ctx, tx, name) })
}

func (db *DB) migrateStep(ctx context.Context, tx *txn, name string) error {
	base := migrationName(name)
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM migrations WHERE name = ?`, base).Scan(&n); err != nil {
		return err
	} else if n > 0 {
		return nil
	}
	buf, err := fs.ReadFile(migrations, name)
	if err != nil {
		return err
	}
	if _, err := tx.tx.ExecContext(ctx, string(buf)); err != nil { // a script: no placeholders
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO migrations (name) VALUES (?)`, base)
	return err
}
