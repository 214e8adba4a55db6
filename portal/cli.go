package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
)

// cliEnv is what an admin subcommand reads and writes besides the portal.
type cliEnv struct {
	getenv func(string) string
	out    io.Writer // results
	errOut io.Writer // usage
	in     io.Reader // answers to questions; nil: nobody to ask
}

// cliCommands are the admin subcommands; each talks to the running portal
// over its admin socket.
var cliCommands = map[string]func(ctx context.Context, e cliEnv, args []string) error{
	"pools":    runPools,
	"pool":     runPool,
	"desktops": runDesktops,
	"release":  runRelease,
	"assign":   runAssign,
	"unassign": runUnassign,
	"connect":  runConnect,
	"recreate": runRecreate,
	"history":  runHistory,
	"audit":    runAudit,
	"doctor":   runDoctor,
	"usb":      runUSB,
}

// cliUsage is the help text of the admin subcommands.
const cliUsage = `Admin subcommands talk to the running portal over its admin socket
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
  history [-user U] [-pool NS/POOL] [-since 24h] [-until T]   console sessions
  audit [-user U] [-pool NS/POOL] [-since 24h] [-until T]     the audit log

These need no running portal:
  doctor                                   check this machine or cluster before creating pools
  usb list                                 USB devices on this machine
  usb redir --portal URL NS/DESKTOP --device VID:PID   share a USB device with your desktop
  usb redir NS/DESKTOP --device VID:PID --user U       admin path: virtctl usbredir for U's VM

Each takes -h (with examples), -json (machine output) and, talking to the
portal, -socket PATH. Exit codes: 0 done, 1 failed, 2 usage, 3 not found,
4 conflict (nothing free, held, ambiguous), 5 portal not running, 6 refused.`

// cliFlags is a subcommand's flag set with the flags every subcommand has.
type cliFlags struct {
	*flag.FlagSet
	env    cliEnv
	socket string
	json   bool
	// examples, when set, close the help text.
	examples string
}

// newCLIFlags returns the flag set of the subcommand name, whose arguments
// usage shows.
func newCLIFlags(e cliEnv, name, usage string) *cliFlags {
	f := &cliFlags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), env: e}
	f.SetOutput(e.errOut)
	f.StringVar(&f.socket, "socket", "", "the portal's admin socket; default admin.sock in CORRAL_VDI_DATA_DIR (CORRAL_VDI_ADMIN_SOCKET)")
	f.BoolVar(&f.json, "json", false, "print JSON instead of a table")
	f.Usage = func() {
		fmt.Fprintf(f.Output(), "usage: corral-vdi-portal %s %s\n\nflags:\n", name, usage)
		f.PrintDefaults()
		if f.examples != "" {
			fmt.Fprintf(f.Output(), "\nexamples:\n%s\n", f.examples)
		}
	}
	return f
}

// parseFlags parses args with flags before, between or after the
// positional arguments and returns those; flag errors are usage errors.
func (f *cliFlags) parseFlags(args []string) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err}
		}
		if f.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, f.Arg(0))
		args = f.Args()[1:]
	}
}

// parse parses args with flags before, between or after the positional
// arguments, whose names want lists.
func (f *cliFlags) parse(args []string, want ...string) ([]string, error) {
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

// client returns a client of the portal's admin socket.
func (f *cliFlags) client() (*adminClient, error) {
	path, where, err := cliSocket(f.socket, f.env.getenv)
	if err != nil {
		return nil, err
	}
	return &adminClient{socket: path, where: where, http: &http.Client{
		Timeout: 5 * time.Minute, // recreating a desktop can take a while
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}}, nil
}

// cliSocket finds the admin socket: -socket, CORRAL_VDI_ADMIN_SOCKET, or
// admin.sock in the data directory serve uses. where says which, for
// messages.
func cliSocket(flagValue string, getenv func(string) string) (path, where string, err error) {
	if flagValue != "" {
		return flagValue, "given by -socket", nil
	}
	switch v := getenv("CORRAL_VDI_ADMIN_SOCKET"); v {
	case "off":
		return "", "", errors.New("CORRAL_VDI_ADMIN_SOCKET is off, so the portal serves no admin socket: unset it where the portal runs and restart it, or pass -socket")
	case "":
	default:
		return v, "from CORRAL_VDI_ADMIN_SOCKET", nil
	}
	dir := getenv("CORRAL_VDI_DATA_DIR")
	if dir == "" {
		dir = defaultDataDir(getenv)
	}
	return filepath.Join(dir, adminSocketName), "in the data directory " + dir + " (CORRAL_VDI_DATA_DIR)", nil
}

// adminClient calls the portal's JSON API over its admin socket.
type adminClient struct {
	socket string
	where  string // how the socket was found
	http   *http.Client
	// portalURL is the portal's web address, as its answers say.
	portalURL string
}

// portalURLHeader carries the portal's web address on the admin socket's
// answers, for commands that print links.
const portalURLHeader = "Corral-Portal-Url"

// apiError is an error the portal answered with: what happened and what
// to do next.
type apiError struct {
	Status int    `json:"-"`
	Msg    string `json:"error"`
	Hint   string `json:"hint"`
}

func (e *apiError) Error() string {
	if e.Hint == "" {
		return e.Msg
	}
	return e.Msg + "\n  " + e.Hint
}

// do sends method path with body as JSON (unless nil) and returns the
// answer's JSON.
func (c *adminClient) do(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		buf, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://portal"+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.dialError(err)
	}
	defer res.Body.Close()
	if u := res.Header.Get(portalURLHeader); u != "" {
		c.portalURL = u
	}
	answer, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the portal's answer: %w", err)
	}
	if res.StatusCode/100 != 2 {
		e := &apiError{Status: res.StatusCode}
		if json.Unmarshal(answer, e) != nil || e.Msg == "" {
			return nil, fmt.Errorf("the portal answered %s to %s %s; see its log", res.Status, method, path)
		}
		return nil, e
	}
	return answer, nil
}

// get fetches path into out.
func (c *adminClient) get(ctx context.Context, path string, out any) (json.RawMessage, error) {
	raw, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if err := jsonInto(raw, out); err != nil {
		return nil, err
	}
	return raw, nil
}

// jsonInto decodes an answer of the portal into out.
func jsonInto(raw json.RawMessage, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("the portal's answer is not what this command expects (%v): are the portal and this command the same version?", err)
	}
	return nil
}

// dialError explains a failure to reach the portal.
func (c *adminClient) dialError(err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return &noPortalError{fmt.Errorf("the portal is not running: nothing answers on %s, looked for %s.\n"+
			"  Start it with `make run` or `corral-vdi-portal serve`, or point -socket (CORRAL_VDI_ADMIN_SOCKET) at the admin socket of the portal you mean", c.socket, c.where)}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return refusef("permission denied on the admin socket %s: only root and the portal's user may use it; run the command as one of them", c.socket)
	}
	return fmt.Errorf("talking to the portal on %s: %w", c.socket, err)
}

// printJSON prints raw indented.
func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := buf.WriteTo(w)
	return err
}

// table writes rows under header, in aligned columns.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		for i, c := range r {
			if c == "" {
				c = "-"
			}
			r[i] = strings.Map(printable, c)
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// printable maps control characters, which user-written texts such as a
// release reason may hold, to spaces: they would break the table or drive
// the admin's terminal.
func printable(r rune) rune {
	if unicode.IsControl(r) {
		return ' '
	}
	return r
}

// ref splits NS/NAME and escapes both for a URL path.
func ref(arg, what string) (string, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", usagef("%q is not NAMESPACE/%s, e.g. local/demo-1 (see `corral-vdi-portal desktops -all`)", arg, what)
	}
	return url.PathEscape(ns) + "/" + url.PathEscape(name), nil
}

// stamp formats t for tables, in the local zone.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// done prints what an action did, or the portal's answer with -json.
func (f *cliFlags) done(raw json.RawMessage, format string, args ...any) error {
	if f.json {
		return printJSON(f.env.out, raw)
	}
	_, err := fmt.Fprintf(f.env.out, format+"\n", args...)
	return err
}
