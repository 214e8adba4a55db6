package cli

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// runRecordings is `corral-vdi-portal recordings list|delete`.
func runRecordings(ctx context.Context, e Env, args []string) error {
	return runGroup(ctx, e, "recordings", args, []subcommand{{"list", runRecordingsList}, {"delete", runRecordingsDelete}})
}

// runRecordingsList is `corral-vdi-portal recordings list`: recorded
// console sessions, newest first.
func runRecordingsList(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "recordings list", "[-user U] [-desktop NS/MEMBER] [-since D|T] [-until D|T] [-json]")
	f.Examples = `  corral-vdi-portal recordings list -user alice -since 24h
  corral-vdi-portal recordings list -desktop local/exam-1 -json`
	var user, desktop, since, until string
	f.StringVar(&user, "user", "", "only this user's recordings")
	f.StringVar(&desktop, "desktop", "", "only this desktop's, as NS/MEMBER")
	f.StringVar(&since, "since", "", "started this long ago (24h) or after this time (2006-01-02, 2006-01-02T15:04 local, or RFC 3339)")
	f.StringVar(&until, "until", "", "started before this long ago or this time, like -since")
	if _, err := f.ParseArgs(args); err != nil {
		return err
	}
	q := url.Values{}
	if user != "" {
		q.Set("user", user)
	}
	if desktop != "" {
		if _, err := ref(desktop, "MEMBER"); err != nil {
			return err
		}
		q.Set("desktop", desktop)
	}
	for _, b := range []struct{ name, in string }{{"since", since}, {"until", until}} {
		if b.in == "" {
			continue
		}
		t, err := historyTime(b.in, time.Now())
		if err != nil {
			return usagef("-%s: %v", b.name, err)
		}
		q.Set(b.name, t.UTC().Format(time.RFC3339))
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var recs []api.Recording
	raw, err := c.get(ctx, "/api/vdi/recordings?"+q.Encode(), &recs)
	if err != nil {
		return err
	}
	if f.JSON {
		return PrintJSON(e.Out, raw)
	}
	rows := make([][]string, 0, len(recs))
	for _, r := range recs {
		end := "recording"
		if r.End != nil {
			end = stamp(*r.End)
		}
		rows = append(rows, []string{r.ID, stamp(r.Start), end, r.User, r.Desktop, r.Protocol, byteCount(r.Bytes)})
	}
	return table(e.Out, []string{"ID", "STARTED", "ENDED", "USER", "DESKTOP", "CONSOLE", "SIZE"}, rows)
}

// recordingID is what a recording id looks like (a session id).
var recordingID = regexp.MustCompile(`^[0-9a-f]{8,64}$`)

// runRecordingsDelete is `corral-vdi-portal recordings delete ID`.
func runRecordingsDelete(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "recordings delete", "ID [-json]")
	f.Examples = `  corral-vdi-portal recordings list -user alice   # find the ID
  corral-vdi-portal recordings delete 3f2a9c0d1e4b5a6f7c8d9e0f`
	pos, err := f.ParseArgs(args, "ID")
	if err != nil {
		return err
	}
	if !recordingID.MatchString(pos[0]) {
		return usagef("%q is not a recording ID; see `corral-vdi-portal recordings list`", pos[0])
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodDelete, "/api/vdi/recordings/"+pos[0], nil)
	if err != nil {
		return err
	}
	return f.done(raw, "deleted recording %s (the audit log says you did)", pos[0])
}
