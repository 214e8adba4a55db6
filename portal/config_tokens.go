package portal

import (
	"flag"
	"fmt"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/auth"
)

// tokenFlags declares the RDP token keys and the shared-secret check on
// fs; the returned function reads them into c once fs is parsed. The keys
// have no flag of their own (flags show in ps): pass them in the
// environment or a file.
func tokenFlags(fs *flag.FlagSet, c *Config, getenv func(string) string, env func(name, def string) string) func() error {
	var keysFile string
	fs.StringVar(&keysFile, "token-keys-file", env("CORRAL_VDI_TOKEN_KEYS_FILE", ""),
		"file of RDP token keys, newest first, shared by every replica; or set CORRAL_VDI_TOKEN_KEYS; default a key of this process (CORRAL_VDI_TOKEN_KEYS_FILE)")
	fs.StringVar(&c.SharedSecretsFrom, "shared-secrets-from", env("CORRAL_VDI_SHARED_SECRETS_FROM", ""),
		"the Kubernetes Secret the replicas' shared keys come from; when set, a missing key keeps the portal not ready and names it (CORRAL_VDI_SHARED_SECRETS_FROM)")
	return func() error {
		keys, err := valueOrFile(getenv("CORRAL_VDI_TOKEN_KEYS"), keysFile, "CORRAL_VDI_TOKEN_KEYS")
		if err != nil {
			return err
		}
		// The same format and rules as the session keys: base64, at
		// least 32 bytes, newest first, comma- or line-separated.
		if c.TokenKeys, err = auth.ParseSessionKeys(keys); err != nil {
			return fmt.Errorf("CORRAL_VDI_TOKEN_KEYS: %s", strings.ReplaceAll(err.Error(), "session key", "token key"))
		}
		return nil
	}
}

// sharedSecret is one key every replica must have the same of.
type sharedSecret struct {
	env string // the environment variable the Deployment sets
	key string // the key in the Secret, as deploy/ names it
	set bool
}

// missingSharedSecrets returns what c lacks of the keys replicas share,
// by the Secret keys deploy/ maps them from.
func (c Config) missingSharedSecrets() []sharedSecret {
	all := []sharedSecret{
		{"CORRAL_VDI_SESSION_KEYS", "session-keys", len(c.SessionKeys) > 0},
		{"CORRAL_VDI_TOKEN_KEYS", "token-keys", len(c.TokenKeys) > 0},
		{"CORRAL_VDI_PEER_SECRET", "peer-secret", len(c.PeerSecret) > 0},
	}
	if contains(c.Auth, auth.ModeOIDC) {
		all = append(all, sharedSecret{"CORRAL_VDI_OIDC_CLIENT_SECRET", "oidc-client-secret", c.OIDC.ClientSecret != ""})
	}
	var missing []sharedSecret
	for _, s := range all {
		if !s.set {
			missing = append(missing, s)
		}
	}
	return missing
}
