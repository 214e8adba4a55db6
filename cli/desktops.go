package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// runDesktops is `corral-vdi-portal desktops [-all]`: claimed desktops with
// their holders, or every desktop.
func runDesktops(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "desktops", "[-all] [-json]")
	all := f.Bool("all", false, "list free desktops too")
	if _, err := f.ParseArgs(args); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var raws []json.RawMessage
	if _, err := c.get(ctx, "/api/vdi/desktops?all=1", &raws); err != nil {
		return err
	}
	keep := []json.RawMessage{}
	var rows [][]string
	for _, raw := range raws {
		var d vdi.Desktop
		if err := jsonInto(raw, &d); err != nil {
			return err
		}
		if d.Holder == "" && !*all {
			continue
		}
		keep = append(keep, raw)
		power := string(d.Power)
		if d.Reason != "" {
			power += ": " + d.Reason
		}
		var reclaim string
		if d.Reclaim != nil {
			reclaim = d.Reclaim.Rule + " at " + stamp(d.Reclaim.At)
		}
		holder := d.Holder
		if d.Resetting != "" {
			holder = holderText(d)
		}
		rows = append(rows, []string{d.Namespace + "/" + d.Name, d.Pool, power, holder, stamp(d.ClaimedAt), reclaim})
	}
	if f.JSON {
		raw, err := json.Marshal(keep)
		if err != nil {
			return err
		}
		return PrintJSON(e.Out, raw)
	}
	return table(e.Out, []string{"DESKTOP", "POOL", "POWER", "HOLDER", "SINCE", "RECLAIM"}, rows)
}

// runRelease is `corral-vdi-portal release NS/DESKTOP [-reason R]`: an
// admin force-release, which the holder's console shows with the reason.
func runRelease(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "release", "NS/DESKTOP [-reason R]")
	reason := f.String("reason", "", "why, for the audit log and the holder's console")
	desktop, path, err := f.parseRef(args, "DESKTOP")
	if err != nil {
		return err
	}
	raw, err := postDesktop(ctx, f, path, "release", api.Release{Reason: strings.TrimSpace(*reason)})
	if err != nil {
		return err
	}
	return f.done(raw, "released %s", desktop)
}

// runRecreate is `corral-vdi-portal recreate NS/DESKTOP`.
func runRecreate(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "recreate", "NS/DESKTOP")
	desktop, path, err := f.parseRef(args, "DESKTOP")
	if err != nil {
		return err
	}
	raw, err := postDesktop(ctx, f, path, "recreate", nil)
	if err != nil {
		return err
	}
	if c, cerr := f.client(); cerr == nil {
		if _, err := c.awaitPool(ctx, e.ErrOut, raw); err != nil {
			return err
		}
	}
	return f.done(raw, "recreated %s from its pool's source", desktop)
}

// postDesktop posts body to POST /api/vdi/desktops/{path}/{action}.
func postDesktop(ctx context.Context, f *Flags, path, action string, body any) (json.RawMessage, error) {
	c, err := f.client()
	if err != nil {
		return nil, err
	}
	return c.do(ctx, http.MethodPost, "/api/vdi/desktops/"+path+"/"+action, body)
}
