package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// runAssign is `corral-vdi-portal assign NS/POOL USER` (a free desktop of
// the pool) or `assign NS/DESKTOP USER` (that desktop). A name that is both
// a pool and a desktop is refused rather than guessed.
func runAssign(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "assign", "NS/POOL|NS/DESKTOP USER [-json]")
	f.Examples = `  corral-vdi-portal assign local/demo alice        # a free desktop of pool demo
  corral-vdi-portal assign local/demo-2 alice      # that desktop`
	pos, err := f.ParseArgs(args, "NS/POOL|NS/DESKTOP", "USER")
	if err != nil {
		return err
	}
	if _, err := ref(pos[0], "POOL"); err != nil {
		return err
	}
	ns, name, _ := strings.Cut(pos[0], "/")
	user := pos[1]
	c, err := f.client()
	if err != nil {
		return err
	}
	_, poolErr := findPool(ctx, c, ns, name)
	var nf *api.Error
	if poolErr != nil && !(errors.As(poolErr, &nf) && nf.Status == http.StatusNotFound) {
		return poolErr
	}
	ds, err := allDesktops(ctx, c)
	if err != nil {
		return err
	}
	isPool := poolErr == nil
	member := slices.IndexFunc(ds, func(d vdi.Desktop) bool { return d.Namespace == ns && d.Name == name })
	switch {
	case isPool && member >= 0:
		return conflictf("%s names both a pool and a desktop (of pool %s); refusing to guess.\n"+
			"  Give the desktop's pool a different name, or assign through the API: POST /api/vdi/desktops/%s/assign", pos[0], ds[member].Pool, pos[0])
	case member >= 0:
		raw, err := c.do(ctx, http.MethodPost, "/api/vdi/desktops/"+pathOf(ns, name)+"/assign", api.Assign{User: user})
		if err != nil {
			return err
		}
		return assigned(f, raw, user)
	case !isPool:
		return poolErr
	}
	// As a claim does: the desktop USER holds already, else a free one of
	// the pool, running ones first.
	for _, d := range ds {
		if d.Namespace == ns && d.Pool == name && d.Holder == user {
			raw, err := json.Marshal(d)
			if err != nil {
				return err
			}
			return f.done(raw, "%s holds %s/%s already (%s)\n  see `corral-vdi-portal connect %s/%s`", user, d.Namespace, d.Name, d.Power, d.Namespace, d.Name)
		}
	}
	var free []vdi.Desktop
	for _, d := range ds {
		if d.Namespace == ns && d.Pool == name && d.Holder == "" && d.Resetting == "" && d.Power != vdi.PowerFailed {
			free = append(free, d)
		}
	}
	slices.SortStableFunc(free, func(a, b vdi.Desktop) int {
		return boolRank(a.Power == vdi.PowerRunning) - boolRank(b.Power == vdi.PowerRunning)
	})
	for _, d := range free {
		raw, err := c.do(ctx, http.MethodPost, "/api/vdi/desktops/"+pathOf(ns, d.Name)+"/assign", api.Assign{User: user})
		if lostRace(err) {
			continue // someone claimed it between the list and now
		} else if err != nil {
			return err
		}
		return assigned(f, raw, user)
	}
	return conflictf("pool %s has no free desktop for %s; see `corral-vdi-portal pool list %s`, grow it with `pool resize`, or unassign one", pos[0], user, pos[0])
}

// lostRace reports whether err is the portal's answer to assigning a
// desktop that someone claimed since it was listed.
func lostRace(err error) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Status == http.StatusConflict &&
		(strings.Contains(ae.Msg, "claimed meanwhile") || strings.Contains(ae.Msg, "is held by"))
}

// boolRank orders true before false.
func boolRank(b bool) int {
	if b {
		return 0
	}
	return 1
}

// pathOf escapes ns and name for a URL path.
func pathOf(ns, name string) string { return url.PathEscape(ns) + "/" + url.PathEscape(name) }

// assigned reports an assignment and how to connect.
func assigned(f *Flags, raw json.RawMessage, user string) error {
	var d vdi.Desktop
	if err := jsonInto(raw, &d); err != nil {
		return err
	}
	r := d.Namespace + "/" + d.Name
	return f.done(raw, "assigned %s to %s (%s)\n  %s connects at /desktops/%s; see `corral-vdi-portal connect %s`", r, user, d.Power, user, r, r)
}

// runUnassign is `corral-vdi-portal unassign NS/DESKTOP [--force]`: the
// end of an admin's assignment. A desktop its holder claimed themselves
// needs --force, since taking it from them is a force-release.
func runUnassign(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "unassign", "NS/DESKTOP [--force] [-reason R] [-json]")
	force := f.Bool("force", false, "release it even though its holder claimed it themselves")
	reason := f.String("reason", "", "why, for the audit log and the holder's console")
	f.Examples = `  corral-vdi-portal unassign local/demo-2
  corral-vdi-portal unassign local/demo-2 --force -reason "maintenance at noon"`
	desktop, path, err := f.parseRef(args, "DESKTOP")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var d vdi.Desktop
	if _, err := c.get(ctx, "/api/vdi/desktops/"+path, &d); err != nil {
		return err
	}
	if d.Resetting != "" {
		return conflictf("%s is being reset (%s) and held by nobody; nothing to unassign", desktop, d.Resetting)
	}
	if d.Holder == "" {
		return conflictf("%s is not assigned to anyone; nothing to unassign", desktop)
	}
	if !*force {
		by, err := assignedBy(ctx, c, d)
		if err != nil {
			return err
		}
		if by == "" {
			return conflictf("%s is held by %s, who claimed it themselves (since %s); pass --force to take it from them", desktop, d.Holder, stamp(d.ClaimedAt))
		}
	}
	raw, err := c.do(ctx, http.MethodPost, "/api/vdi/desktops/"+path+"/release", api.Release{Reason: strings.TrimSpace(*reason)})
	if err != nil {
		return err
	}
	return f.done(raw, "unassigned %s from %s", desktop, d.Holder)
}

// assignedBy returns the admin who assigned d's current claim, or "" when
// its holder claimed it (or the audit log no longer says).
func assignedBy(ctx context.Context, c *adminClient, d vdi.Desktop) (string, error) {
	q := url.Values{"pool": {d.Namespace + "/" + d.Pool}, "limit": {"1000"},
		"since": {d.ClaimedAt.Add(-time.Minute).UTC().Format(time.RFC3339)}}
	var rows []api.AuditEntry
	if _, err := c.get(ctx, "/api/vdi/history/audit?"+q.Encode(), &rows); err != nil {
		return "", err
	}
	for _, a := range rows { // newest first
		if a.Namespace != d.Namespace || a.Target != d.Name {
			continue
		}
		switch a.Action {
		case "assign":
			if a.Detail == "to "+d.Holder {
				return a.Actor, nil
			}
			return "", nil
		case "claim":
			return "", nil
		}
	}
	return "", nil
}
