package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// historyFlags are the filters of /admin/history as flags.
type historyFlags struct {
	user, pool, since, until string
	limit                    int
}

// newHistoryFlags declares the history filters on a new flag set.
func newHistoryFlags(e Env, name string) (*Flags, *historyFlags) {
	f := NewFlags(e, name, "[-user U] [-pool NS/POOL] [-since D|T] [-until D|T] [-limit N] [-json]")
	h := &historyFlags{}
	f.StringVar(&h.user, "user", "", "only this login (a session's user, an event's actor or the holder it names)")
	f.StringVar(&h.pool, "pool", "", "only this pool's desktops, as NS/POOL")
	f.StringVar(&h.since, "since", "", "from this long ago (24h) or this time (2006-01-02, 2006-01-02T15:04 local, or RFC 3339)")
	f.StringVar(&h.until, "until", "", "before this long ago or this time, like -since")
	f.IntVar(&h.limit, "limit", 100, "newest rows to show, up to 100000")
	return f, h
}

// query returns the filters as the history routes' query string.
func (h *historyFlags) query(now time.Time) (string, error) {
	q := url.Values{"limit": {strconv.Itoa(h.limit)}}
	if h.user != "" {
		q.Set("user", h.user)
	}
	if h.pool != "" {
		q.Set("pool", h.pool)
	}
	for _, b := range []struct{ name, in string }{{"since", h.since}, {"until", h.until}} {
		if b.in == "" {
			continue
		}
		t, err := historyTime(b.in, now)
		if err != nil {
			return "", fmt.Errorf("-%s: %w", b.name, err)
		}
		q.Set(b.name, t.UTC().Format(time.RFC3339))
	}
	return q.Encode(), nil
}

// historyTime reads a duration back from now, or a time.
func historyTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration like 24h nor a time like 2006-01-02T15:04", s)
}

// runHistory is `corral-vdi-portal history`: console sessions, newest first.
func runHistory(ctx context.Context, e Env, args []string) error {
	return runHistoryList(ctx, e, args, "history", "/api/vdi/history/sessions",
		[]string{"OPENED", "CLOSED", "USER", "DESKTOP", "PROTOCOL", "PATH", "IN", "OUT", "REASON"},
		func(s api.Session) []string {
			closed := stamp(s.Closed)
			if s.Closed.IsZero() {
				closed = "open"
			}
			return []string{stamp(s.Opened), closed, s.User, s.Namespace + "/" + s.Desktop, s.Protocol, s.Path,
				byteCount(s.BytesIn), byteCount(s.BytesOut), s.CloseReason}
		})
}

// runAudit is `corral-vdi-portal audit`: the audit log, newest first.
func runAudit(ctx context.Context, e Env, args []string) error {
	return runHistoryList(ctx, e, args, "audit", "/api/vdi/history/audit",
		[]string{"AT", "ACTOR", "ACTION", "TARGET", "DETAIL"},
		func(a api.AuditEntry) []string {
			target := a.Target
			if a.Namespace != "" {
				target = a.Namespace + "/" + a.Target
			}
			return []string{stamp(a.At), a.Actor, a.Action, target, a.Detail}
		})
}

// runHistoryList runs the history command name: it asks route for the rows
// the filter flags in args select and prints them as the portal's JSON
// with -json, else as a table of header with one row a record.
func runHistoryList[T any](ctx context.Context, e Env, args []string, name, route string, header []string, row func(T) []string) error {
	f, h := newHistoryFlags(e, name)
	if _, err := f.ParseArgs(args); err != nil {
		return err
	}
	q, err := h.query(time.Now())
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var records []T
	raw, err := c.get(ctx, route+"?"+q, &records)
	if err != nil {
		return err
	}
	if f.JSON {
		return PrintJSON(e.Out, raw)
	}
	rows := make([][]string, 0, len(records))
	for _, r := range records {
		rows = append(rows, row(r))
	}
	return table(e.Out, header, rows)
}

// byteCount formats n bytes briefly: 512B, 3.1K, 42.0M.
func byteCount(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + "B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%c", float64(n)/float64(div), "KMGTPE"[exp])
}
