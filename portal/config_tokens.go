package portal

import "github.com/corral-dev/corral-vdi-portal/auth"

// sharedSecret is one key of the deployed portal's Secret.
type sharedSecret struct {
	env string // the environment variable the Deployment sets
	key string // the key in the Secret, as deploy/ names it
	set bool
	// ready says the portal is not ready without the key (every replica
	// must have the same of it); without any other key only what needs it
	// is closed.
	ready bool
}

// missingSharedSecrets returns what c lacks of the keys of the deployed
// portal's Secret, by the Secret keys deploy/ maps them from, and whether
// c has any of them (the Secret exists).
func (c Config) missingSharedSecrets() (missing []sharedSecret, some bool) {
	all := []sharedSecret{
		{"CORRAL_VDI_SESSION_KEYS", "session-keys", len(c.Auth.SessionKeys) > 0, true},
		{"CORRAL_VDI_TOKEN_KEYS", "token-keys", len(c.Console.TokenKeys) > 0, true},
		{"CORRAL_VDI_PEER_SECRET", "peer-secret", len(c.Console.PeerSecret) > 0, true},
		// /metrics names pools and namespaces: a deployed portal, reached
		// through an Ingress that sends it every path, never serves it
		// without a token; it closes /metrics and stays ready, so that a
		// rolling update from a release that did not ask for the key goes
		// through.
		{"CORRAL_VDI_METRICS_TOKEN", "metrics-token", c.Server.MetricsToken != "", false},
	}
	if contains(c.Auth.Modes, auth.ModeOIDC) {
		all = append(all, sharedSecret{"CORRAL_VDI_OIDC_CLIENT_SECRET", "oidc-client-secret", c.Auth.OIDC.ClientSecret != "", true})
	}
	for _, s := range all {
		if !s.set {
			missing = append(missing, s)
		}
	}
	return missing, len(missing) < len(all)
}
