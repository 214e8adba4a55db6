package portal

import "github.com/corral-dev/corral-vdi-portal/auth"

// sharedSecret is one key of the deployed portal's Secret: every replica
// must have the same of it.
type sharedSecret struct {
	env string // the environment variable the Deployment sets
	key string // the key in the Secret, as deploy/ names it
	set bool
}

// missingSharedSecrets returns what c lacks of the keys replicas share,
// by the Secret keys deploy/ maps them from.
func (c Config) missingSharedSecrets() []sharedSecret {
	all := []sharedSecret{
		{"CORRAL_VDI_SESSION_KEYS", "session-keys", len(c.Auth.SessionKeys) > 0},
		{"CORRAL_VDI_TOKEN_KEYS", "token-keys", len(c.Console.TokenKeys) > 0},
		{"CORRAL_VDI_PEER_SECRET", "peer-secret", len(c.Console.PeerSecret) > 0},
		// /metrics names pools and namespaces: a deployed portal, reached
		// through an Ingress that sends it every path, never serves it
		// without a token.
		{"CORRAL_VDI_METRICS_TOKEN", "metrics-token", c.Server.MetricsToken != ""},
	}
	if contains(c.Auth.Modes, auth.ModeOIDC) {
		all = append(all, sharedSecret{"CORRAL_VDI_OIDC_CLIENT_SECRET", "oidc-client-secret", c.Auth.OIDC.ClientSecret != ""})
	}
	var missing []sharedSecret
	for _, s := range all {
		if !s.set {
			missing = append(missing, s)
		}
	}
	return missing
}
