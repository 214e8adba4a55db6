package portal

import (
	"bytes"
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSettings_Table: every row is whole, its flag unique, its group
// known, and its variable derived from the flag's name (KUBECONFIG aside).
func TestSettings_Table(t *testing.T) {
	groups := map[string]bool{}
	for _, g := range configGroups {
		groups[g.key] = true
	}
	seen := map[string]bool{}
	for _, s := range settings {
		if seen[s.name] {
			t.Errorf("flag -%s is in the table twice", s.name)
		}
		seen[s.name] = true
		if !groups[s.group] || s.help == "" || s.set == nil {
			t.Errorf("-%s: group %q, help %q, set %v; want a known group, help and a setter", s.name, s.group, s.help, s.set != nil)
		}
		want := "CORRAL_VDI_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
		if got := s.envName(); got != want && got != "KUBECONFIG" {
			t.Errorf("-%s reads %s; want %s (derived from the flag)", s.name, got, want)
		}
		if s.secret && !strings.HasSuffix(s.name, "-file") {
			t.Errorf("-%s is a secret but not a -…-file flag", s.name)
		}
	}
}

// TestSettings_EnvNamesKept: the variables deployments set still reach
// their flags, legacy names included; a flag beats its variable.
func TestSettings_EnvNamesKept(t *testing.T) {
	for _, name := range []string{ // every name the portal read before the table, and the DESIGN's
		"CORRAL_VDI_LISTEN", "CORRAL_VDI_DATA_DIR", "CORRAL_VDI_BACKEND", "KUBECONFIG", "CORRAL_VDI_AUTH",
		"CORRAL_VDI_TRUSTED_PROXIES", "CORRAL_VDI_ADMINS", "CORRAL_VDI_DISCONNECT_GRACE", "CORRAL_VDI_MAX_SESSION",
		"CORRAL_VDI_IDLE_TIMEOUT", "CORRAL_VDI_PUBLIC_URL", "CORRAL_VDI_GROUPS_FILE", "CORRAL_VDI_MAX_DESKTOPS_PER_USER",
		"CORRAL_VDI_MAX_CONSOLES_PER_USER", "CORRAL_VDI_DESKTOP_UIDS", "CORRAL_VDI_TOKEN_KEYS", "CORRAL_VDI_TOKEN_KEYS_FILE",
		"CORRAL_VDI_RECORDING_RETENTION", "CORRAL_VDI_METRICS_TOKEN", "CORRAL_VDI_METRICS_TOKEN_FILE",
		"CORRAL_VDI_DATABASE_URL", "CORRAL_VDI_DATABASE_PASSWORD_FILE", "CORRAL_VDI_DESKTOP_SANDBOX",
		"CORRAL_VDI_DESKTOP_LIMITS", "CORRAL_VDI_DESKTOP_NETWORK", "CORRAL_VDI_VM_ACCEL", "CORRAL_VDI_KVM_DEVICE",
		"CORRAL_VDI_KUBE_QPS", "CORRAL_VDI_POOL_NAMESPACES", "CORRAL_VDI_NAMESPACE", "CORRAL_VDI_DRAIN_TIMEOUT",
		"CORRAL_VDI_HISTORY_RETENTION", "CORRAL_VDI_HISTORY_MAX_ROWS", "CORRAL_VDI_HISTORY_BUFFER_ROWS",
		"CORRAL_VDI_RECLAIM_INTERVAL", "CORRAL_VDI_DEMO_POOL_SIZE", "CORRAL_VDI_DEMO_VM_POOL_SIZE",
		"CORRAL_VDI_STOP_DESKTOPS_ON_EXIT", "CORRAL_VDI_ADMIN_SOCKET", "CORRAL_VDI_VM_IMAGE", "CORRAL_VDI_VM_IMAGE_CACHE",
		"CORRAL_VDI_VM_LISTEN", "CORRAL_VDI_PEERS", "CORRAL_VDI_PEER_SECRET", "CORRAL_VDI_PEER_SECRET_FILE",
		"CORRAL_VDI_OIDC_ISSUER", "CORRAL_VDI_OIDC_CLIENT_ID", "CORRAL_VDI_OIDC_CLIENT_SECRET", "CORRAL_VDI_OIDC_CLIENT_SECRET_FILE",
		"CORRAL_VDI_OIDC_REDIRECT_URL", "CORRAL_VDI_OIDC_ADMIN_GROUPS", "CORRAL_VDI_OIDC_ADMIN_GROUP",
		"CORRAL_VDI_OIDC_GROUPS_CLAIM", "CORRAL_VDI_OIDC_LOGIN_CLAIM", "CORRAL_VDI_OIDC_SCOPES", "CORRAL_VDI_OIDC_PROVIDER_NAME",
		"CORRAL_VDI_SESSION_KEYS", "CORRAL_VDI_SESSION_KEYS_FILE", "CORRAL_VDI_SESSION_LIFETIME", "CORRAL_VDI_SHARED_SECRETS_FROM",
		"CORRAL_VDI_RECORDING_MAX_BYTES", "CORRAL_VDI_RECORDING_MAX_BYTES_PER_USER", "CORRAL_VDI_RECORDING_DISK_RESERVE",
		"CORRAL_VDI_UPLOAD_MAX", "CORRAL_VDI_UPLOAD_QUOTA",
	} {
		if !ConfigEnvNames()[name] {
			t.Errorf("ConfigEnvNames lacks %s, which deployments set", name)
		}
	}
	// Each variable becomes its flag's value, whatever the table row.
	env := func(k string) string {
		if strings.HasPrefix(k, "CORRAL_VDI_") || k == "KUBECONFIG" {
			return "v-" + k
		}
		return ""
	}
	fs, _ := settingsFlags(env)
	for _, s := range settings {
		if got, want := fs.Lookup(s.name).DefValue, "v-"+s.envName(); got != want {
			t.Errorf("-%s with %s set: default %q; want %q", s.name, s.envName(), got, want)
		}
	}
	fs, _ = settingsFlags(func(k string) string { return map[string]string{"CORRAL_VDI_OIDC_ADMIN_GROUP": "old"}[k] })
	if got := fs.Lookup("oidc-admin-groups").DefValue; got != "old" {
		t.Errorf("CORRAL_VDI_OIDC_ADMIN_GROUP=old: -oidc-admin-groups defaults to %q; want old", got)
	}
	c, err := ParseConfig([]string{"-max-consoles-per-user=3"}, func(k string) string {
		return map[string]string{"CORRAL_VDI_BACKEND": "local", "HOME": t.TempDir(), "CORRAL_VDI_MAX_CONSOLES_PER_USER": "7"}[k]
	})
	if err != nil || c.Console.MaxConsolesPerUser != 3 {
		t.Errorf("flag 3, env 7: MaxConsolesPerUser = %d, %v; want 3 (the flag wins)", c.Console.MaxConsolesPerUser, err)
	}
}

// TestParseConfig_DatabasePassword: the password comes from its file or
// its variable, never both, and needs a database URL.
func TestParseConfig_DatabasePassword(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"CORRAL_VDI_BACKEND": "local", "HOME": t.TempDir(), "CORRAL_VDI_DATABASE_URL": "postgres://corral@db/corral"}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"file", map[string]string{"CORRAL_VDI_DATABASE_PASSWORD_FILE": file}, "s3cret", ""},
		{"variable", map[string]string{"CORRAL_VDI_DATABASE_PASSWORD": "pw"}, "pw", ""},
		{"both", map[string]string{"CORRAL_VDI_DATABASE_PASSWORD": "pw", "CORRAL_VDI_DATABASE_PASSWORD_FILE": file}, "", "both set"},
		{"no url", map[string]string{"CORRAL_VDI_DATABASE_PASSWORD_FILE": file, "CORRAL_VDI_DATABASE_URL": ""}, "", "CORRAL_VDI_DATABASE_URL is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(nil, func(k string) string {
				if v, ok := tc.env[k]; ok {
					return v
				}
				return base[k]
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseConfig = %v; want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || c.Store.DatabasePassword != tc.want {
				t.Fatalf("DatabasePassword = %q, %v; want %q", c.Store.DatabasePassword, err, tc.want)
			}
			if tc.name == "file" && !strings.Contains(strings.Join(c.SecretFiles, ","), file) {
				t.Errorf("SecretFiles = %v; want the password file hidden from desktops too", c.SecretFiles)
			}
		})
	}
}

// TestConfigReadOnlyHere: no package but this one reads a CORRAL_VDI_*
// variable from the process environment (os.Getenv or os.LookupEnv with
// the name written out); tests may.
func TestConfigReadOnlyHere(t *testing.T) {
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if rel, _ := filepath.Rel(root, path); strings.HasPrefix(rel, "portal"+string(filepath.Separator)+"config") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Getenv" && sel.Sel.Name != "LookupEnv") {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "os" {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok {
				if name, _ := strconv.Unquote(lit.Value); strings.HasPrefix(name, "CORRAL_VDI_") {
					t.Errorf("%s reads %s itself; add a row to portal/config_table.go and pass the value in", path, name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestParseConfig_Help: serve -h lists every flag under its group with
// its variable, and says the flag wins.
func TestParseConfig_Help(t *testing.T) {
	if _, err := ParseConfig([]string{"-h"}, func(string) string { return "" }); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("ParseConfig(-h) = %v; want flag.ErrHelp", err)
	}
	fs, _ := settingsFlags(func(k string) string { return map[string]string{"CORRAL_VDI_VM_LISTEN": "tcp"}[k] })
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage()
	help := out.String()
	for _, g := range configGroups {
		if !strings.Contains(help, "\n"+g.title+": ") {
			t.Errorf("serve -h lacks the group %q", g.title)
		}
	}
	for _, want := range []string{"-vm-listen  CORRAL_VDI_VM_LISTEN (default tcp)", "-token-keys-file  CORRAL_VDI_TOKEN_KEYS or CORRAL_VDI_TOKEN_KEYS_FILE", "the flag wins"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve -h lacks %q:\n%s", want, help)
		}
	}
	for _, s := range settings {
		if !strings.Contains(help, "  -"+s.name+"  ") {
			t.Errorf("serve -h lacks -%s", s.name)
		}
	}
}
