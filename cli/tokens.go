package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// runToken is `corral-vdi-portal token create|list|revoke`: personal
// access tokens for agents and scripts, made by an admin for a user (a
// service user, typically).
func runToken(ctx context.Context, e Env, args []string) error {
	return runGroup(ctx, e, "token", args, []subcommand{
		{"create", runTokenCreate}, {"list", runTokenList}, {"revoke", runTokenRevoke},
	})
}

// runTokenCreate is `corral-vdi-portal token create NAME -user U -pools
// NS/POOL,.. [-scopes see,act,claim] [-expires 720h] [-admin]`: the token
// is printed once.
func runTokenCreate(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "token create", "NAME -user U -pools NS/POOL,.. [-scopes see,act,claim] [-expires 720h] [-admin] [-json]")
	user := f.String("user", "", "the user the token acts as (required: the CLI's own user has no tokens)")
	pools := f.String("pools", "", `pools the token may use, comma-separated ("*": every pool the user may use)`)
	scopes := f.String("scopes", "", `what the token may do, comma-separated: see (screenshots, the clipboard out), act (pointer, keys), claim (claim and release); empty: all three`)
	expires := f.String("expires", "720h", "how long the token lives, from 1m to 8784h")
	admin := f.Bool("admin", false, "an admin token (the user must be an admin too)")
	f.Examples = `  corral-vdi-portal token create test-runner -user ci-bot -pools local/demo
  corral-vdi-portal token create nightly -user ci-bot -pools '*' -expires 24h
  corral-vdi-portal token create watcher -user ci-bot -pools local/demo -scopes see`
	pos, err := f.ParseArgs(args, "NAME")
	if err != nil {
		return err
	}
	if *user == "" {
		return usagef("token create needs -user: the user the token acts as")
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	req := api.TokenRequest{Name: pos[0], User: *user, Expires: *expires, Admin: *admin}
	req.Pools, req.Scopes = splitList(*pools), splitList(*scopes)
	raw, err := c.do(ctx, http.MethodPost, "/api/vdi/tokens", req)
	if err != nil {
		return err
	}
	var t api.Token
	if err := jsonInto(raw, &t); err != nil {
		return err
	}
	return f.done(raw, "made token %s (%s) for %s on %s to %s until %s; it is not shown again:\n%s", t.Name, t.ID, t.User, strings.Join(t.Pools, ","), strings.Join(t.Scopes, ","), stamp(t.Expires), t.Token)
}

// runTokenList is `corral-vdi-portal token list`: every user's tokens,
// with their last use.
func runTokenList(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "token list", "[-json]")
	f.Examples = `  corral-vdi-portal token list`
	if _, err := f.ParseArgs(args); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var list []api.Token
	raw, err := c.get(ctx, "/api/vdi/tokens?all=1", &list)
	if err != nil {
		return err
	}
	if f.JSON {
		return PrintJSON(e.Out, raw)
	}
	rows := make([][]string, 0, len(list))
	for _, t := range list {
		used := "never"
		if !t.LastUsed.IsZero() {
			used = stamp(t.LastUsed)
		}
		rows = append(rows, []string{t.ID, t.User, t.Name, strings.Join(t.Pools, ","), strings.Join(t.Scopes, ","), stamp(t.Expires), used})
	}
	return table(e.Out, []string{"ID", "USER", "NAME", "POOLS", "SCOPES", "EXPIRES", "LAST USED"}, rows)
}

// runTokenRevoke is `corral-vdi-portal token revoke ID`: the token stops
// working at once.
func runTokenRevoke(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "token revoke", "ID")
	f.Examples = `  corral-vdi-portal token revoke Xq3v9aZk1bC2   # the ID from token list`
	pos, err := f.ParseArgs(args, "ID")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodDelete, "/api/vdi/tokens/"+url.PathEscape(pos[0]), nil); err != nil {
		return err
	}
	return f.done(json.RawMessage(`{}`), "revoked token %s", pos[0])
}
