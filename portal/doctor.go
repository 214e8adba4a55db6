package portal

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/cli"
)

// doctor checks a machine (local backend) or a cluster (kube backend)
// before pools are made on it, from the same configuration serve reads,
// with no running portal. Each finding is ok, warn or fail with what to
// do; a fail makes the command exit non-zero.

// Levels of a finding.
const (
	levelOK   = "ok"
	levelWarn = "warn"
	levelFail = "fail"
)

// finding is one thing doctor checked.
type finding struct {
	Check string `json:"check"`
	Level string `json:"level"`
	What  string `json:"what"`
	// Fix says what to do; empty when ok.
	Fix string `json:"fix,omitempty"`
}

// findings collects what the checks found.
type findings []finding

func (fs *findings) ok(check, format string, args ...any) {
	*fs = append(*fs, finding{Check: check, Level: levelOK, What: fmt.Sprintf(format, args...)})
}

func (fs *findings) warn(check, fix, format string, args ...any) {
	*fs = append(*fs, finding{Check: check, Level: levelWarn, What: fmt.Sprintf(format, args...), Fix: fix})
}

func (fs *findings) fail(check, fix, format string, args ...any) {
	*fs = append(*fs, finding{Check: check, Level: levelFail, What: fmt.Sprintf(format, args...), Fix: fix})
}

// failed counts the failing findings.
func (fs findings) failed() int {
	n := 0
	for _, f := range fs {
		if f.Level == levelFail {
			n++
		}
	}
	return n
}

// find returns the findings of check.
func (fs findings) find(check string) []finding {
	var out []finding
	for _, f := range fs {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// doctorFailed is a doctor run with n failing findings; it exits with
// cli.ExitFailed.
type doctorFailed struct{ n int }

func (e *doctorFailed) Error() string {
	return fmt.Sprintf("doctor: %d check(s) failed; fix them before creating pools", e.n)
}

// Doctor is `corral-vdi-portal doctor`. It is the server's preflight, not
// a client of a running portal: it reads serve's configuration with
// serve's parser and checks what serve needs at start, with the admin
// subcommands' flags and exit codes. After -h it returns flag.ErrHelp.
func Doctor(ctx context.Context, e cli.Env, args []string) error {
	fl := cli.NewFlags(e, "doctor", "[-backend local|kube] [-kubeconfig F] [-namespace NS] [-json]")
	var backend, kubeconfig, namespace string
	fl.StringVar(&backend, "backend", "", "check this backend; default the one serve would use (CORRAL_VDI_BACKEND)")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "the cluster to check; default serve's (KUBECONFIG, in-cluster, ~/.kube/config)")
	fl.StringVar(&namespace, "namespace", "", "the portal's own namespace, of its leader Lease; default serve's (CORRAL_VDI_NAMESPACE)")
	fl.Examples = `  corral-vdi-portal doctor                          # the backend serve would use
  corral-vdi-portal doctor -backend kube -kubeconfig ~/.kube/vdi.yaml
  corral-vdi-portal doctor -json | jq '.[] | select(.level != "ok")'`
	if _, err := fl.ParseArgs(args); err != nil {
		return err
	}
	var serveArgs []string
	for name, v := range map[string]string{"backend": backend, "kubeconfig": kubeconfig, "namespace": namespace} {
		if v != "" {
			serveArgs = append(serveArgs, "-"+name, v)
		}
	}
	var fs findings
	cfg, err := ParseConfig(serveArgs, e.Getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return err
	case err != nil:
		fs.fail("config", "Fix the setting it names (serve -h lists each with its CORRAL_VDI_* variable).", "%v", err)
	case cfg.Server.Backend == BackendKube:
		fs.ok("config", "backend kube, kubeconfig %s, portal namespace %s", orInCluster(cfg.Kube.Kubeconfig), cfg.Kube.Namespace)
		checkKube(ctx, &fs, cfg)
		checkH264(ctx, &fs, cfg)
	default:
		fs.ok("config", "backend local, data directory %s", cfg.Server.DataDir)
		checkLocal(ctx, &fs, cfg, e.Getenv)
	}
	if err := printFindings(e.Out, fs, fl.JSON); err != nil {
		return err
	}
	if n := fs.failed(); n > 0 {
		return &doctorFailed{n: n}
	}
	return nil
}

// orInCluster names the kubeconfig, or the in-cluster config.
func orInCluster(kubeconfig string) string {
	if kubeconfig == "" {
		return "(in-cluster)"
	}
	return kubeconfig
}

// printFindings writes fs as JSON or as one block a finding.
func printFindings(w io.Writer, fs findings, asJSON bool) error {
	if asJSON {
		raw, err := json.Marshal(fs)
		if err != nil {
			return err
		}
		return cli.PrintJSON(w, raw)
	}
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%-4s  %-14s %s\n", f.Level, f.Check, strings.Map(cli.Printable, f.What))
		if f.Fix != "" {
			fmt.Fprintf(&b, "      %-14s fix: %s\n", "", strings.Map(cli.Printable, f.Fix))
		}
	}
	warn := 0
	for _, f := range fs {
		if f.Level == levelWarn {
			warn++
		}
	}
	fmt.Fprintf(&b, "\n%d ok, %d warn, %d fail\n", len(fs)-warn-fs.failed(), warn, fs.failed())
	_, err := io.WriteString(w, b.String())
	return err
}
