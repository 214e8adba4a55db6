package portal

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

var envNameRE = regexp.MustCompile(`\b(CORRAL_VDI_[A-Z0-9_]+|KUBECONFIG)\b`)

// ConfigEnvNames returns every environment variable the portal reads:
// each setting's, its older names, and a secret's value variable.
func ConfigEnvNames() map[string]bool {
	names := map[string]bool{}
	for _, s := range settings {
		names[s.envName()] = true
		for _, n := range s.legacy {
			names[n] = true
		}
		if s.secret {
			names[s.valueEnv()] = true
		}
	}
	return names
}

// ConfigReference returns docs/configuration.md: every setting of `serve`
// by group, with its flag, environment variable, default and meaning,
// from the settings table (`make docs` writes it; a test keeps it fresh).
func ConfigReference() []byte {
	var b bytes.Buffer
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("Generated from the settings table in `portal/config_table.go` by `make docs`; do not edit.\n")
	b.WriteString("Every setting is a flag of `corral-vdi-portal serve` and an environment variable named after it\n")
	b.WriteString("(`CORRAL_VDI_` and the flag in upper snake case); the flag wins. Secrets have no flag (flags show in `ps`):\n")
	b.WriteString("set the variable, or the `-…-file` flag (its `_FILE` variable) to a file holding the value.\n")
	for _, g := range configGroups {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", g.title, g.intro)
		b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
		for _, s := range settings {
			if s.group != g.key {
				continue
			}
			env := "`" + s.envName() + "`"
			if s.secret {
				env = "`" + s.valueEnv() + "` or " + env
			}
			for _, n := range s.legacy {
				env += " (formerly `" + n + "`)"
			}
			def := "`" + s.def + "`"
			switch {
			case s.docDefault != "":
				def = s.docDefault
			case s.def == "":
				def = "empty"
			}
			help := strings.ReplaceAll(envNameRE.ReplaceAllString(s.help, "`$1`"), "|", `\|`)
			fmt.Fprintf(&b, "| `-%s` | %s | %s | %s |\n", s.name, env, def, help)
		}
	}
	return b.Bytes()
}
