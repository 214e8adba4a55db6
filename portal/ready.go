package portal

import (
	"errors"
	"fmt"
	"strings"
)

// errNotReady is what /readyz reports while the portal lacks something it
// cannot serve without; the log says what once, at start.
var errNotReady = errors.New("not ready")

// replicaName is what the history page calls this replica when its
// history is its own: the election identity of a kube replica keeping
// SQLite in its data dir; empty for one portal, or for replicas that share
// PostgreSQL.
func replicaName(c Config, identity string) string {
	if c.DatabaseURL != "" {
		return ""
	}
	return identity
}

// checkSharedSecrets makes the portal not ready, with one log line naming
// the Secret and its missing keys, when Config.SharedSecretsFrom is set
// and any key the replicas share is empty: a replica that serves with a
// key of its own breaks consoles and sign-ins that cross replicas.
func (m *Main) checkSharedSecrets() {
	from := m.Config.SharedSecretsFrom
	if from == "" {
		return
	}
	missing := m.Config.missingSharedSecrets()
	if len(missing) == 0 {
		return
	}
	var keys, envs []string
	var literals []string
	for _, s := range missing {
		keys, envs = append(keys, s.key), append(envs, s.env)
		value := `"$(openssl rand -base64 32)"`
		if s.key == "oidc-client-secret" {
			value = "<the client secret from your OpenID provider>"
		}
		literals = append(literals, "--from-literal="+s.key+"="+value)
	}
	ns, name, ok := strings.Cut(from, "/")
	if !ok {
		ns, name = m.Config.Namespace, from
	}
	m.notReady = fmt.Errorf("%w: Secret %s/%s lacks %s", errNotReady, ns, name, strings.Join(keys, ", "))
	m.Log.Error("shared secrets missing: not ready until the Secret has them and the pods restart",
		"secret", ns+"/"+name, "keys", strings.Join(keys, ","), "env", strings.Join(envs, ","),
		"fix", fmt.Sprintf("kubectl -n %s create secret generic %s %s (or add the keys to it), then kubectl -n %s rollout restart deployment", ns, name, strings.Join(literals, " "), ns))
}
