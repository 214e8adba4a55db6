package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"
)

// Flags is a subcommand's flag set with the flags every subcommand has.
type Flags struct {
	*flag.FlagSet
	env    Env
	socket string
	// JSON reports whether -json asks for machine output.
	JSON bool
	// Examples, when set, close the help text.
	Examples string
}

// NewFlags returns the flag set of the subcommand name, whose arguments
// usage shows: -socket, -json, and -h that prints usage, the flags and
// the examples to e.ErrOut.
func NewFlags(e Env, name, usage string) *Flags {
	f := &Flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), env: e}
	f.SetOutput(e.ErrOut)
	f.StringVar(&f.socket, "socket", "", "the portal's admin socket; default admin.sock in CORRAL_VDI_DATA_DIR (CORRAL_VDI_ADMIN_SOCKET)")
	f.BoolVar(&f.JSON, "json", false, "print JSON instead of a table")
	f.Usage = func() {
		fmt.Fprintf(f.Output(), "usage: corral-vdi-portal %s %s\n\nflags:\n", name, usage)
		f.PrintDefaults()
		if f.Examples != "" {
			fmt.Fprintf(f.Output(), "\nexamples:\n%s\n", f.Examples)
		}
	}
	return f
}

// parseFlags parses args with flags before, between or after the
// positional arguments and returns those; flag errors are usage errors.
func (f *Flags) parseFlags(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &exitError{ExitUsage, err}
		}
		if f.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, f.Arg(0))
		args = f.Args()[1:]
	}
}

// ParseArgs parses args with flags before, between or after the
// positional arguments, whose names want lists, and returns those. A
// wrong count or a bad flag is a usage error (ExitUsage); -h returns
// flag.ErrHelp.
func (f *Flags) ParseArgs(args []string, want ...string) ([]string, error) {
	pos, err := f.parseFlags(args)
	if err != nil {
		return nil, err
	}
	if len(pos) != len(want) {
		f.Usage()
		if len(want) == 0 {
			return nil, usagef("%s takes no arguments, got %s", f.Name(), strings.Join(pos, " "))
		}
		return nil, usagef("%s wants %s, got %q", f.Name(), strings.Join(want, " "), strings.Join(pos, " "))
	}
	return pos, nil
}

// parseRef is ParseArgs for a subcommand of one positional argument,
// NS/<what> (DESKTOP, POOL): it returns that and its path in the API.
func (f *Flags) parseRef(args []string, what string) (arg, path string, err error) {
	pos, err := f.ParseArgs(args, "NS/"+what)
	if err != nil {
		return "", "", err
	}
	path, err = ref(pos[0], what)
	return pos[0], path, err
}
