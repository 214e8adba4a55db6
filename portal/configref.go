package portal

import (
	"bytes"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// describing, when set, receives ParseConfig's flag set before parsing:
// how ConfigReference reads the flags without a second list of them.
var (
	describing   atomic.Pointer[func(*flag.FlagSet)]
	describingMu sync.Mutex
)

// describeFlags hands fs to ConfigReference when it asks.
func describeFlags(fs *flag.FlagSet) {
	if f := describing.Load(); f != nil {
		(*f)(fs)
	}
}

// serveFlags returns the flags of `serve` as ParseConfig declares them,
// with the built-in defaults (an empty environment).
func serveFlags() *flag.FlagSet {
	describingMu.Lock()
	defer describingMu.Unlock()
	var got *flag.FlagSet
	f := func(fs *flag.FlagSet) { got = fs }
	describing.Store(&f)
	defer describing.Store(nil)
	ParseConfig(nil, func(string) string { return "" }) // errors past the flags do not matter here
	return got
}

var envNameRE = regexp.MustCompile(`\b(CORRAL_VDI_[A-Z0-9_]+|KUBECONFIG)\b`)

// ConfigEnvNames returns every environment variable the portal reads
// (those named in its flags' help, secrets without a flag included).
func ConfigEnvNames() map[string]bool {
	names := map[string]bool{}
	serveFlags().VisitAll(func(f *flag.Flag) {
		for _, n := range envNameRE.FindAllString(f.Usage, -1) {
			names[n] = true
		}
	})
	return names
}

// defaultsThatVary are defaults that depend on the machine, shown as the
// rule rather than this machine's value.
var defaultsThatVary = map[string]string{
	"data-dir":  "`$XDG_DATA_HOME/corral-vdi` or `~/.local/share/corral-vdi`",
	"namespace": "the pod's namespace, else `default`",
}

// ConfigReference returns docs/configuration.md: every flag of `serve`
// with its environment variable, default and meaning, from the flag
// definitions themselves (a test keeps the file fresh).
func ConfigReference() []byte {
	var b bytes.Buffer
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("Generated from the flags of `corral-vdi-portal serve` (`go test ./portal -run TestConfigReference -update`); do not edit.\n")
	b.WriteString("Every setting is a flag and an environment variable; the flag wins. Secrets have no flag (flags show in `ps`):\n")
	b.WriteString("set the variable, or its `_FILE` twin to a file holding the value.\n\n")
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	var rows []string
	serveFlags().VisitAll(func(f *flag.Flag) {
		usage := f.Usage
		env := ""
		if i := strings.LastIndex(usage, " ("); i >= 0 && strings.HasSuffix(usage, ")") {
			env, usage = usage[i+2:len(usage)-1], usage[:i]
		}
		def := "`" + f.DefValue + "`"
		if f.DefValue == "" {
			def = "empty"
		}
		if v, ok := defaultsThatVary[f.Name]; ok {
			def = v
		}
		usage = envNameRE.ReplaceAllString(usage, "`$1`")
		rows = append(rows, fmt.Sprintf("| `-%s` | `%s` | %s | %s |\n", f.Name, env, def, strings.ReplaceAll(usage, "|", `\|`)))
	})
	slices.Sort(rows)
	for _, r := range rows {
		b.WriteString(r)
	}
	return b.Bytes()
}
