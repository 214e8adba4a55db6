// Package cli is the admin command line client: the subcommands that talk
// to a running portal over its admin socket (pools, desktops, assign,
// history, ...) and the USB commands, with the conventions every
// subcommand shares: -h with examples, -json, -socket and the exit codes.
// It reads the portal's answers as the api types the handlers write.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// Env is what an admin subcommand reads and writes besides the portal.
type Env struct {
	Getenv func(string) string
	Out    io.Writer // results
	ErrOut io.Writer // usage
	In     io.Reader // answers to questions; nil: nobody to ask
}

// Stdio returns the Env of a process: its environment, stdout, stderr
// and stdin.
func Stdio() Env {
	return Env{Getenv: os.Getenv, Out: os.Stdout, ErrOut: os.Stderr, In: os.Stdin}
}

// commands are the admin subcommands; those that need the portal talk to
// it over its admin socket.
var commands = map[string]func(ctx context.Context, e Env, args []string) error{
	"pools":      runPools,
	"pool":       runPool,
	"desktops":   runDesktops,
	"release":    runRelease,
	"assign":     runAssign,
	"unassign":   runUnassign,
	"connect":    runConnect,
	"recreate":   runRecreate,
	"share":      runShare,
	"shares":     runShares,
	"unshare":    runUnshare,
	"history":    runHistory,
	"recordings": runRecordings,
	"audit":      runAudit,
	"usb":        runUSB,
	"token":      runToken,
}

// Run runs the admin subcommand name with args. After -h it returns
// flag.ErrHelp, which is no failure.
func Run(ctx context.Context, e Env, name string, args []string) error {
	run, ok := commands[name]
	if !ok {
		return fmt.Errorf("unknown command %q (try help)", name)
	}
	return run(ctx, e, args)
}

// subcommand is one command of a group such as pool or usb.
type subcommand struct {
	name string
	run  func(ctx context.Context, e Env, args []string) error
}

// runGroup runs the command of group that args name, one of subs, whose
// order the messages keep.
func runGroup(ctx context.Context, e Env, group string, args []string, subs []subcommand) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	usage := "usage: corral-vdi-portal " + group + " " + strings.Join(names, "|") + " ... (each takes -h)"
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if len(args) == 0 {
		return usagef("%s wants %s\n%s", group, want, usage)
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, e, args[1:])
		}
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(e.ErrOut, usage)
		return nil
	}
	return usagef("%s %s: unknown; want %s", group, args[0], want)
}

// Usage is the help text of the admin subcommands (and doctor, which
// the portal runs).
const Usage = `Admin subcommands talk to the running portal over its admin socket
(admin.sock in CORRAL_VDI_DATA_DIR; root or the portal's user only):

  pools                                    list pools
  pool create NAME --from GOLDEN --size N [--ephemeral] [-n NS] ...
                                           create a pool (pool create -h)
  pool list [NS/POOL]                      one row per desktop: holder or free, power, since
  pool update NS/POOL -access-groups G ...  who may use a pool, desktops per user (pool update -h)
  pool resize NS/POOL SIZE                 add or remove free desktops
  pool delete NS/POOL                      delete a pool nobody holds a desktop of
  desktops [-all]                          claimed desktops (-all: every desktop)
  assign NS/POOL USER                      give USER a free desktop of the pool and start it
  assign NS/DESKTOP USER                   give that free desktop to USER
  unassign NS/DESKTOP [--force]            release it (--force: USER claimed it themselves)
  release NS/DESKTOP [-reason R]           force-release a desktop
  connect NS/DESKTOP                       the one-click URL and every console with its path
  recreate NS/DESKTOP                      make a free desktop fresh from its source
  share NS/DESKTOP USER [-control]         invite USER to the desktop's screen (-expires 1h)
  shares NS/DESKTOP                        the desktop's invitations
  unshare NS/DESKTOP ID                    revoke one; its console closes
  history [-user U] [-pool NS/POOL] [-since 24h] [-until T]   console sessions
  audit [-user U] [-pool NS/POOL] [-since 24h] [-until T]     the audit log
  recordings list [-user U] [-desktop NS/DESKTOP] [-since 24h]  recorded console sessions
  recordings delete ID                     delete a recording (audited)
  token create NAME -user U -pools NS/POOL  a personal access token for an agent (token create -h)
  token list                               every user's tokens, with their last use
  token revoke ID                          the token stops working at once

These need no running portal:
  doctor                                   check this machine or cluster before creating pools
  usb list                                 USB devices on this machine
  usb redir --portal URL NS/DESKTOP --device VID:PID   share a USB device with your desktop
  usb redir NS/DESKTOP --device VID:PID --user U       admin path: virtctl usbredir for U's VM

Each takes -h (with examples), -json (machine output) and, talking to the
portal, -socket PATH. Exit codes: 0 done, 1 failed, 2 usage, 3 not found,
4 conflict (nothing free, held, ambiguous), 5 portal not running, 6 refused.`
