package portal

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	testKey1 = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="
	testKey2 = "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="
)

// TestParseConfig_TokenKeys: CORRAL_VDI_TOKEN_KEYS and its _FILE, newest
// first, with the session keys' rules.
func TestParseConfig_TokenKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token-keys")
	os.WriteFile(file, []byte("# newest first\n"+testKey2+"\n"+testKey1+"\n"), 0o600)
	tests := []struct {
		name    string
		env     map[string]string
		keys    int
		wantErr string
	}{
		{"Unset", nil, 0, ""},
		{"Env", map[string]string{"CORRAL_VDI_TOKEN_KEYS": testKey2 + "," + testKey1}, 2, ""},
		{"File", map[string]string{"CORRAL_VDI_TOKEN_KEYS_FILE": file}, 2, ""},
		{"Both", map[string]string{"CORRAL_VDI_TOKEN_KEYS_FILE": file, "CORRAL_VDI_TOKEN_KEYS": testKey1}, 0, "both set"},
		{"Short", map[string]string{"CORRAL_VDI_TOKEN_KEYS": "c2hvcnQ="}, 0, "token key 1 has 5 bytes"},
		{"NoFile", map[string]string{"CORRAL_VDI_TOKEN_KEYS_FILE": file + ".missing"}, 0, "CORRAL_VDI_TOKEN_KEYS_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"CORRAL_VDI_BACKEND": "local", "HOME": t.TempDir()}
			for k, v := range tt.env {
				env[k] = v
			}
			c, err := ParseConfig(nil, func(k string) string { return env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseConfig = %v; want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Console.TokenKeys) != tt.keys {
				t.Fatalf("%d token keys; want %d", len(c.Console.TokenKeys), tt.keys)
			}
			if tt.keys == 2 && c.Console.TokenKeys[0][0] != 2 {
				t.Errorf("first token key starts %d; want the newest (2) first", c.Console.TokenKeys[0][0])
			}
		})
	}
}

// TestCheckSharedSecrets: with CORRAL_VDI_SHARED_SECRETS_FROM set, missing
// keys make /readyz fail and are logged once, naming the Secret, the keys
// and the patch that adds them; without metrics-token alone the portal is
// ready with /metrics closed.
func TestCheckSharedSecrets(t *testing.T) {
	env := map[string]string{"CORRAL_VDI_BACKEND": "local", "HOME": t.TempDir(), "CORRAL_VDI_NAMESPACE": "corral-vdi",
		"CORRAL_VDI_SHARED_SECRETS_FROM": "corral-vdi-secrets", "CORRAL_VDI_TOKEN_KEYS": testKey1}
	c, err := ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	m := &Main{Config: c, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	m.checkSharedSecrets()
	if err := m.ready(context.Background()); !errors.Is(err, errNotReady) {
		t.Fatalf("ready = %v; want not ready", err)
	}
	line := logs.String()
	if n := strings.Count(line, "\n"); n != 1 {
		t.Fatalf("%d log lines; want one:\n%s", n, line)
	}
	for _, want := range []string{"secret=corral-vdi/corral-vdi-secrets", "session-keys", "peer-secret", "metrics-token", "CORRAL_VDI_SESSION_KEYS", "kubectl -n corral-vdi patch secret corral-vdi-secrets"} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q; want %q", line, want)
		}
	}
	if strings.Contains(line, "token-keys") {
		t.Errorf("log %q names token-keys, which is set", line)
	}

	if m.metricsClosed == "" {
		t.Errorf("no metrics token, /metrics not closed")
	}

	// An upgrade from a release that did not ask for metrics-token: the
	// Secret has the other keys. Ready, /metrics closed, one warning with
	// the patch that adds the key.
	env["CORRAL_VDI_SESSION_KEYS"], env["CORRAL_VDI_PEER_SECRET"] = testKey2, "a-peer-secret-of-enough-length"
	if c, err = ParseConfig(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	m = &Main{Config: c, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	m.checkSharedSecrets()
	if m.notReady != nil {
		t.Fatalf("only metrics-token missing: %v; want ready (a rolling update goes through)", m.notReady)
	}
	line = logs.String()
	if n := strings.Count(line, "\n"); n != 1 || !strings.Contains(line, "level=WARN") {
		t.Fatalf("%d log lines; want one warning:\n%s", n, line)
	}
	patch := `kubectl -n corral-vdi patch secret corral-vdi-secrets -p \"{\\\"stringData\\\":{\\\"metrics-token\\\":\\\"$(openssl rand -base64 32)\\\"}}\"`
	for _, want := range []string{"keys=metrics-token", patch, "&& kubectl -n corral-vdi rollout restart deployment/corral-vdi-portal"} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q; want %q", line, want)
		}
	}
	if !strings.Contains(m.metricsClosed, "patch secret corral-vdi-secrets") {
		t.Errorf("/metrics closed with %q; want the patch that opens it", m.metricsClosed)
	}

	env["CORRAL_VDI_METRICS_TOKEN"] = "a-metrics-token"
	if c, err = ParseConfig(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	m = &Main{Config: c, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	m.checkSharedSecrets()
	if m.notReady != nil || m.metricsClosed != "" || logs.Len() != 0 {
		t.Fatalf("every shared secret set, still %v, metrics closed %q, log %q", m.notReady, m.metricsClosed, logs.String())
	}
}
