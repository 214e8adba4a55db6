package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// PrintJSON prints raw indented.
func PrintJSON(w io.Writer, raw json.RawMessage) error {
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
			r[i] = strings.Map(Printable, c)
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// Printable maps control characters, which user-written texts such as a
// release reason may hold, to spaces: they would break the table or drive
// the admin's terminal.
func Printable(r rune) rune {
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
func (f *Flags) done(raw json.RawMessage, format string, args ...any) error {
	if f.JSON {
		return PrintJSON(f.env.Out, raw)
	}
	_, err := fmt.Fprintf(f.env.Out, format+"\n", args...)
	return err
}
