package cli

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// accessFlagSet holds the flags that say who may use a pool and what one
// user may hold; unset flags change nothing.
type accessFlagSet struct {
	fs            *Flags
	users, groups string
	perUser       int
	standby       int
	usersSet      bool
	groupsSet     bool
	perUserWasSet bool
	standbySet    bool
}

// accessFlags adds -access-users, -access-groups and -desktops-per-user to f.
func accessFlags(f *Flags) *accessFlagSet {
	a := &accessFlagSet{fs: f}
	f.StringVar(&a.users, "access-users", "", "logins who may use the pool, comma-separated; with -access-groups empty for both: everyone signed in")
	f.StringVar(&a.groups, "access-groups", "", "groups whose members may use the pool, comma-separated")
	f.IntVar(&a.perUser, "desktops-per-user", 0, "desktops of the pool one user may hold; 0: no limit beyond the portal's")
	f.IntVar(&a.standby, "standby", 0, "free desktops kept powered on, so that a claim needs no boot; 0: none")
	return a
}

// set notes which flags were given; call it after parsing.
func (a *accessFlagSet) set() {
	a.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "access-users":
			a.usersSet = true
		case "access-groups":
			a.groupsSet = true
		case "desktops-per-user":
			a.perUserWasSet = true
		case "standby":
			a.standbySet = true
		}
	})
}

// access returns the access the flags give, or nil when neither was given.
func (a *accessFlagSet) access() *vdi.Access {
	a.set()
	if !a.usersSet && !a.groupsSet {
		return nil
	}
	return &vdi.Access{Users: splitList(a.users), Groups: splitList(a.groups)}
}

// limits returns the limits the flags give, or nil when not given.
func (a *accessFlagSet) limits() *vdi.Limits {
	a.set()
	if !a.perUserWasSet {
		return nil
	}
	return &vdi.Limits{DesktopsPerUser: a.perUser}
}

// standbyCount returns the standby the flags give, or nil when not given.
func (a *accessFlagSet) standbyCount() *int {
	a.set()
	if !a.standbySet {
		return nil
	}
	return &a.standby
}

// runPoolUpdate is `corral-vdi-portal pool update NS/POOL`: who may use
// the pool and what one user may hold of it.
func runPoolUpdate(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "pool update", "NS/POOL [-access-users L,..] [-access-groups G,..] [-desktops-per-user N] [-standby N]")
	acc := accessFlags(f)
	_, path, err := f.parseRef(args, "POOL")
	if err != nil {
		return err
	}
	body := api.PoolPatch{Access: acc.access(), Limits: acc.limits(), Standby: acc.standbyCount()}
	if body == (api.PoolPatch{}) {
		return errors.New("pool update: say what to change: -access-users, -access-groups, -desktops-per-user or -standby")
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodPatch, "/api/vdi/pools/"+path, body)
	if err != nil {
		return err
	}
	var p vdi.PoolStatus
	if err := jsonInto(raw, &p); err != nil {
		return err
	}
	per := "no per-user limit"
	if p.Limits.DesktopsPerUser > 0 {
		per = strconv.Itoa(p.Limits.DesktopsPerUser) + " per user"
	}
	return f.done(raw, "pool %s/%s is for %s; %s; standby %d", p.Namespace, p.Name, p.Access, per, p.Standby)
}

// splitList returns the items of a comma-separated list, without blanks.
func splitList(s string) []string {
	items := strings.Split(s, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return slices.DeleteFunc(items, func(v string) bool { return v == "" })
}
