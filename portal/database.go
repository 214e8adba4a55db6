package portal

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
)

// openDB opens the portal's database: PostgreSQL when
// CORRAL_VDI_DATABASE_URL names one, else SQLite in the data dir.
func openDB(ctx context.Context, c Config, log *slog.Logger) (*store.DB, error) {
	if c.Store.DatabaseURL == "" {
		if err := ensurePrivate(filepath.Join(c.Server.DataDir, "portal.db")); err != nil {
			return nil, err
		}
		return store.Open(ctx, filepath.Join(c.Server.DataDir, "portal.db"))
	}
	db, err := store.OpenPostgres(ctx, c.Store.DatabaseURL, c.Store.DatabasePassword)
	if err != nil {
		return nil, err
	}
	log.Info("history, audit and sessions in PostgreSQL", "database", store.Redact(c.Store.DatabaseURL))
	return db, nil
}

// ready reports, as a nil error, whether the portal can serve: the local
// backend keeps its pools and claims in the database, so it needs it; the
// kube backend's claims are Leases, so it needs the API server, and a
// database that does not answer only degrades history (Notice says so).
func (m *Main) ready(ctx context.Context) error {
	if m.notReady != nil { // a missing shared secret (checkSharedSecrets)
		return m.notReady
	}
	if m.handler != nil && m.handler.Draining() {
		return errDraining
	}
	if m.Config.Server.Backend == BackendKube {
		return m.apiserver.ready(ctx, time.Now())
	}
	_, err := m.db.LocalPools(ctx)
	return err
}
