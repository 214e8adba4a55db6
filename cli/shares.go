package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// runShare is `corral-vdi-portal share NS/DESKTOP USER [-control]
// [-expires 1h]`: an admin invites USER to the desktop's screen, as its
// holder can from the console's Share panel (past the pool's access
// rules, audited as such).
func runShare(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "share", "NS/DESKTOP USER [-control] [-expires 1h] [-json]")
	control := f.Bool("control", false, "let USER type and point, not only watch")
	expires := f.String("expires", "1h", "how long the invitation lives, from 1m to 24h")
	f.Examples = `  corral-vdi-portal share local/demo-1 bob                      # bob watches for an hour
  corral-vdi-portal share local/demo-1 helpdesk -control -expires 30m`
	pos, err := f.ParseArgs(args, "NS/DESKTOP", "USER")
	if err != nil {
		return err
	}
	path, err := ref(pos[0], "DESKTOP")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodPost, "/api/vdi/desktops/"+path+"/shares", api.ShareRequest{User: pos[1], Control: *control, Expires: *expires})
	if err != nil {
		return err
	}
	var sh api.Share
	if err := jsonInto(raw, &sh); err != nil {
		return err
	}
	return f.done(raw, "invited %s to %s (%s) until %s, invitation %s\n  they open %s", sh.User, pos[0], shareRole(sh), stamp(sh.Expires), sh.ID,
		strings.TrimSuffix(c.portalURL, "/")+sh.URL)
}

// runShares is `corral-vdi-portal shares NS/DESKTOP`: the desktop's live
// invitations.
func runShares(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "shares", "NS/DESKTOP [-json]")
	f.Examples = `  corral-vdi-portal shares local/demo-1`
	_, path, err := f.parseRef(args, "DESKTOP")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var list []api.Share
	raw, err := c.get(ctx, "/api/vdi/desktops/"+path+"/shares", &list)
	if err != nil {
		return err
	}
	if f.JSON {
		return PrintJSON(e.Out, raw)
	}
	rows := make([][]string, 0, len(list))
	for _, sh := range list {
		rows = append(rows, []string{sh.ID, sh.User, shareRole(sh), sh.By, stamp(sh.Expires)})
	}
	return table(e.Out, []string{"ID", "USER", "ROLE", "BY", "UNTIL"}, rows)
}

// runUnshare is `corral-vdi-portal unshare NS/DESKTOP ID`: the invitation
// ends and the console opened with it closes.
func runUnshare(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "unshare", "NS/DESKTOP ID")
	f.Examples = `  corral-vdi-portal unshare local/demo-1 5f0c3a9e1b2d4c6f7a   # the ID from shares`
	pos, err := f.ParseArgs(args, "NS/DESKTOP", "ID")
	if err != nil {
		return err
	}
	path, err := ref(pos[0], "DESKTOP")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodDelete, "/api/vdi/desktops/"+path+"/shares/"+url.PathEscape(pos[1]), nil); err != nil {
		return err
	}
	return f.done(json.RawMessage(`{}`), "revoked invitation %s of %s", pos[1], pos[0])
}

func shareRole(sh api.Share) string {
	if sh.Control {
		return "control"
	}
	return "view only"
}
