package store_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestMigrations_EveryStepInBothDialects keeps the two schemas in step: a
// migration added for SQLite needs its PostgreSQL twin, and back.
func TestMigrations_EveryStepInBothDialects(t *testing.T) {
	names := func(dir string) map[string]bool {
		out := map[string]bool{}
		files, _ := fs.Glob(os.DirFS(dir), "*.sql")
		for _, f := range files {
			out[f] = true
		}
		return out
	}
	sqlite, pg := names("migrations"), names(filepath.Join("migrations", "postgres"))
	for n := range sqlite {
		if !pg[n] {
			t.Errorf("migrations/%s has no PostgreSQL twin in migrations/postgres/", n)
		}
	}
	for n := range pg {
		if !sqlite[n] {
			t.Errorf("migrations/postgres/%s has no SQLite twin in migrations/", n)
		}
	}
}

// TestPostgres_ReplicasMigrateOnce opens one fresh database from several
// portals at once, as replicas starting together do: each migration runs
// once, and all of them work.
func TestPostgres_ReplicasMigrateOnce(t *testing.T) {
	url := testpg.Shared(t).NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	dbs := make([]*store.DB, 4)
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = store.OpenPostgres(context.Background(), url, "") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	if err := dbs[0].Record(context.Background(), vdi.AuditEvent{Actor: "ops", Action: "claim"}); err != nil {
		t.Fatal(err)
	}
	if got, err := dbs[3].AuditLog(context.Background(), 10); err != nil || len(got) != 1 {
		t.Errorf("another replica's audit log: %v, %v; want the one row", got, err)
	}
}

// TestPostgres_BadInput: each mistake an operator can make is one clear
// error that says what to change, and leaves nothing half-written.
func TestPostgres_BadInput(t *testing.T) {
	pg := testpg.Shared(t)
	ctx := context.Background()
	for _, c := range []struct {
		name, url, password, want string
	}{
		{"NotAURL", "mysql://db/corral", "", "not a postgres:// URL"},
		{"WrongPassword", strings.Replace(pg.URL("postgres"), testpg.Password, "nope", 1), "", "user name or password is wrong"},
		{"WrongPasswordFile", pg.URL("postgres"), "nope", "user name or password is wrong"},
		{"NoSuchDatabase", pg.URL("nosuchdb"), "", "create the database first"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, err := store.OpenPostgres(ctx, c.url, c.password)
			if err == nil {
				db.Close()
				t.Fatalf("OpenPostgres(%s) worked; want an error saying %q", c.name, c.want)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), testpg.Password) {
				t.Errorf("OpenPostgres = %v; want it to say %q, without the password", err, c.want)
			}
		})
	}
	t.Run("NoPrivileges", func(t *testing.T) {
		url := pg.NewDatabase(t)
		dbname := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
		pg.Exec(t, dbname, "CREATE ROLE weak LOGIN PASSWORD 'weak-pw'; REVOKE CREATE ON SCHEMA public FROM PUBLIC")
		weak := strings.Replace(url, testpg.Superuser+":"+testpg.Password, "weak:weak-pw", 1)
		_, err := store.OpenPostgres(ctx, weak, "")
		if err == nil || !strings.Contains(err.Error(), "lacks a privilege") {
			t.Errorf("OpenPostgres as a user without CREATE: %v; want it to say which privilege is missing", err)
		}
	})
	t.Run("SchemaNewerThanTheBinary", func(t *testing.T) {
		url := pg.NewDatabase(t)
		db, err := store.OpenPostgres(ctx, url, "")
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		dbname := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
		pg.Exec(t, dbname, "INSERT INTO migrations (name) VALUES ('migrations/9999_from_the_future.sql')")
		_, err = store.OpenPostgres(ctx, url, "")
		if err == nil || !strings.Contains(err.Error(), "schema is newer") || !strings.Contains(err.Error(), "9999_from_the_future") {
			t.Errorf("OpenPostgres of a newer schema: %v; want a refusal naming the unknown step", err)
		}
	})
}
