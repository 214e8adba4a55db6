package portal

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/auth"
)

// ParseConfig reads the settings table from args (flags), then the
// environment (getenv), then the built-in defaults, and checks what spans
// settings. Errors name the environment variable of the setting at fault.
func ParseConfig(args []string, getenv func(string) string) (Config, error) {
	var c Config
	fs, values := settingsFlags(getenv)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	given := map[string]bool{} // settings named by a flag or a variable
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for i, s := range settings {
		v := *values[i]
		if _, ok := lookupEnv(s, getenv); ok {
			given[s.name] = true
		}
		if v != "" && (s.secret || strings.HasSuffix(s.name, "-file") || s.name == "kubeconfig") {
			c.SecretFiles = append(c.SecretFiles, v)
		}
		if s.secret {
			var err error
			if v, err = valueOrFile(getenv(s.valueEnv()), v, s.valueEnv()); err != nil {
				return c, err
			}
		}
		if err := s.set(&c, v); err != nil {
			env := s.envName()
			if s.secret {
				env = s.valueEnv()
			}
			if !strings.HasPrefix(err.Error(), env) {
				err = fmt.Errorf("%s: %w", env, err)
			}
			return c, err
		}
	}
	if !isLoopback(c.Server.Listen) && !given["auth"] {
		c.Auth.Modes = []string{auth.ModeTailscale} // sign-in by name only ever on loopback
	}
	c.Server.AdminSocket = adminSocketPath(c.Server.AdminSocket, c.Server.DataDir)
	if err := checkConfig(c); err != nil {
		return c, err
	}
	if err := resolveBackend(&c, getenv); err != nil {
		return c, err
	}
	c.Kube.Leader = c.Kube.Leader.withDefaults()
	return c, nil
}

// settingsFlags declares every setting on a flag set, its default taken
// from the environment, else the machine, else the table; values[i] is
// where settings[i]'s text lands.
func settingsFlags(getenv func(string) string) (*flag.FlagSet, []*string) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	values := make([]*string, len(settings))
	for i, s := range settings {
		def := s.def
		if s.machineDefault != nil {
			def = s.machineDefault(getenv)
		}
		if v, ok := lookupEnv(s, getenv); ok {
			def = v
		}
		values[i] = new(string)
		*values[i] = def
		usage := s.help + " (" + s.envName() + ")"
		if s.bare {
			fs.Var((*bareBool)(values[i]), s.name, usage)
		} else {
			fs.StringVar(values[i], s.name, def, usage)
		}
	}
	fs.Usage = func() { writeUsage(fs) }
	return fs, values
}

// writeUsage prints serve's flags by group, each with its variable and
// the default it would take now.
func writeUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage: corral-vdi-portal serve [flags]\n\n"+
		"Every flag is also the environment variable after it; the flag wins. docs/configuration.md lists them all.\n")
	for _, g := range configGroups {
		fmt.Fprintf(w, "\n%s: %s\n", g.title, g.intro)
		for _, s := range settings {
			if s.group != g.key {
				continue
			}
			env := s.envName()
			if s.secret {
				env = s.valueEnv() + " or " + env
			}
			def := ""
			if v := fs.Lookup(s.name).DefValue; v != "" {
				def = " (default " + v + ")"
			}
			fmt.Fprintf(w, "  -%s  %s%s\n    \t%s\n", s.name, env, def, s.help)
		}
	}
}

// lookupEnv returns the value of s's variable, or of a legacy name, when
// one is set (not empty).
func lookupEnv(s setting, getenv func(string) string) (string, bool) {
	for _, name := range append([]string{s.envName()}, s.legacy...) {
		if v := getenv(name); v != "" {
			return v, true
		}
	}
	return "", false
}

// checkConfig checks what spans settings.
func checkConfig(c Config) error {
	oidcOn := contains(c.Auth.Modes, auth.ModeOIDC)
	switch {
	case oidcOn && len(c.Auth.SessionKeys) == 0:
		return errors.New("CORRAL_VDI_SESSION_KEYS is not set: OIDC sign-in keeps users in a signed cookie whose keys must survive restarts " +
			"and be shared by every replica; set it (or CORRAL_VDI_SESSION_KEYS_FILE) to the output of `openssl rand -base64 32`")
	case !oidcOn && c.Auth.OIDC.Issuer != "":
		return errors.New("CORRAL_VDI_OIDC_ISSUER is set but CORRAL_VDI_AUTH does not include oidc: add it, e.g. CORRAL_VDI_AUTH=tailscale,oidc")
	case c.Store.DatabasePassword != "" && c.Store.DatabaseURL == "":
		return errors.New("CORRAL_VDI_DATABASE_PASSWORD_FILE is set but CORRAL_VDI_DATABASE_URL is not: name the database too")
	case len(c.Console.Peers) > 0 && len(c.Console.PeerSecret) == 0:
		return errors.New("CORRAL_VDI_PEERS is set but CORRAL_VDI_PEER_SECRET is not: peers only talk to portals that share the secret")
	}
	return nil
}

// valueOrFile returns value, or the contents of file; setting both is an
// error. name is the environment variable, for messages.
func valueOrFile(value, file, name string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("%s and %s_FILE are both set: keep one", name, name)
	}
	buf, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	return string(buf), nil
}

// bareBool is a boolean flag kept as text (parsed with the other settings,
// so that its env value gets the same error): like a flag.Bool it may be
// given bare, --stop-desktops-on-exit meaning true.
type bareBool string

func (b *bareBool) String() string { return string(*b) }

// Set keeps the flag's value, "true" when it is given bare.
func (b *bareBool) Set(s string) error { *b = bareBool(s); return nil }

// IsBoolFlag tells the flag package that the flag may be given bare.
func (b *bareBool) IsBoolFlag() bool { return true }
