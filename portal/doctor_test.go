package portal

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/cli"
)

// TestDoctor_Help checks doctor -h against its golden file: the usage
// line, the flags every admin subcommand has and the examples.
func TestDoctor_Help(t *testing.T) {
	var out, usage bytes.Buffer
	e := cli.Env{Getenv: func(string) string { return "" }, Out: &out, ErrOut: &usage}
	if err := Doctor(context.Background(), e, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("doctor -h = %v; want flag.ErrHelp", err)
	}
	path := filepath.Join("testdata", "doctor-help.golden")
	if *update {
		if err := os.WriteFile(path, usage.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(usage.Bytes(), want) {
		t.Fatalf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, usage.String(), want)
	}
}
