package portal

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// setting is one row of the settings table: a flag of `serve`, the
// environment variable derived from its name, its built-in default, its
// help, and how its text lands in Config.
type setting struct {
	group string // a key of configGroups
	name  string // the flag; CORRAL_VDI_ + its name in upper snake case is the variable
	def   string // the built-in default, as text
	help  string
	set   func(c *Config, v string) error
	// env is the variable when it is not derived from name (KUBECONFIG).
	env string
	// legacy are older variable names still read when env is unset.
	legacy []string
	// secret marks a -…-file flag whose value is a secret: the variable
	// without _FILE may hold the value itself (flags show in ps, so the
	// value has no flag); set gets the value, read from the file if named.
	secret bool
	// bare lets the flag be given without a value, meaning true.
	bare bool
	// machineDefault, when set, computes the default on this machine;
	// docDefault says the rule in docs/configuration.md.
	machineDefault func(getenv func(string) string) string
	docDefault     string
}

// envName is the variable of s: CORRAL_VDI_ and the flag's name in upper
// snake case, unless the row names another.
func (s setting) envName() string {
	if s.env != "" {
		return s.env
	}
	return "CORRAL_VDI_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

// valueEnv is the variable holding a secret's value itself (the file
// variable without _FILE).
func (s setting) valueEnv() string { return strings.TrimSuffix(s.envName(), "_FILE") }

// configGroup is one group of settings, a section of the reference.
type configGroup struct{ key, title, intro string }

// configGroups are the groups in the order the reference shows them.
var configGroups = []configGroup{
	{"server", "Server", "Where the portal listens, what it keeps, how it stops."},
	{"auth", "Identity", "Who users are and who the admins are (docs/identity.md)."},
	{"claims", "Claims and reclaim", "The portal-wide policy; each pool's own policy overrides it."},
	{"console", "Consoles", "What consoles may do and how they reach desktops."},
	{"recording", "Recordings", "Recorded pools' session recordings."},
	{"files", "Files", "The console's Files panel (local desktops)."},
	{"store", "History database", "Audit log and session history."},
	{"local", "Local desktops", "The local backend (the embedded default): desktops on this machine."},
	{"kube", "Kubernetes", "The kube backend: desktops on a cluster (docs/kubernetes.md)."},
}

// The setters below turn a setting's text into a Config field; their
// errors say what the text should be, and the parser adds the variable.

func text(field func(c *Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

func list(field func(c *Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = splitList(v); return nil }
}

// duration reads a duration or off (zero).
func duration(field func(c *Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) (err error) { *field(c), err = parseDuration(v); return err }
}

// positiveDuration reads a duration above zero; example shows one.
func positiveDuration(field func(c *Config) *time.Duration, example string) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := parseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration like %s", v, example)
		}
		*field(c) = d
		return nil
	}
}

// count reads a whole number of at least min; what says what 0 means.
func count(field func(c *Config) *int, min int, what string) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			if min > 0 {
				return fmt.Errorf("%q is not a positive count", v)
			}
			return fmt.Errorf("%q is not a count%s", v, what)
		}
		*field(c) = n
		return nil
	}
}

// oneOf reads one of the words allowed.
func oneOf(field func(c *Config) *string, allowed ...string) func(*Config, string) error {
	return func(c *Config, v string) error {
		for _, a := range allowed {
			if v == a {
				*field(c) = v
				return nil
			}
		}
		return fmt.Errorf("%q is not %s or %s", v, strings.Join(allowed[:len(allowed)-1], ", "), allowed[len(allowed)-1])
	}
}

// size reads a size like 512MiB (see parseBytes), off allowed or not.
func size(field func(c *Config) *int64, offOK bool, example string) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := parseBytes(v)
		if err != nil && offOK {
			return err
		}
		if err != nil || (!offOK && n < 0) {
			return fmt.Errorf("%q is not a size like %s", v, example)
		}
		*field(c) = n
		return nil
	}
}
