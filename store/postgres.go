package store

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// pgxConfig parses a postgres:// URL, with password replacing the URL's
// when set (CORRAL_VDI_DATABASE_PASSWORD_FILE keeps it off the command
// line and out of the environment's URL).
func pgxConfig(rawURL, password string) (*pgx.ConnConfig, error) {
	if !strings.HasPrefix(rawURL, "postgres://") && !strings.HasPrefix(rawURL, "postgresql://") {
		return nil, fmt.Errorf("store: CORRAL_VDI_DATABASE_URL %q is not a postgres:// URL (e.g. postgres://corral@db.example:5432/corral?sslmode=require)", Redact(rawURL))
	}
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: CORRAL_VDI_DATABASE_URL %s does not parse: %v", Redact(rawURL), redactErr(err, rawURL))
	}
	if password != "" {
		cfg.Password = password
	}
	return cfg, nil
}

// openPgx returns a database/sql handle on cfg (pgx's stdlib driver).
func openPgx(cfg *pgx.ConnConfig) *sql.DB { return stdlib.OpenDB(*cfg) }

// Redact returns the URL without its password, for messages and logs.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// redactErr keeps a parse error from quoting the URL with its password.
func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// pgHint adds what to do to PostgreSQL's errors that an operator can fix.
func pgHint(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "28P01", "28000":
		return fmt.Errorf("%w: the user name or password is wrong (CORRAL_VDI_DATABASE_URL, CORRAL_VDI_DATABASE_PASSWORD_FILE)", err)
	case "3D000":
		return fmt.Errorf("%w: create the database first (createdb)", err)
	case "42501":
		return fmt.Errorf("%w: the portal's database user lacks a privilege it needs: grant it CREATE on the database and ownership of the portal's tables", err)
	}
	return err
}
