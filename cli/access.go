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
	usersSet      bool
	groupsSet     bool
	perUserWasSet bool
}

// accessFlags adds -access-users, -access-groups and -desktops-per-user to f.
func accessFlags(f *Flags) *accessFlagSet {
	a := &accessFlagSet{fs: f}
	f.StringVar(&a.users, "access-users", "", "logins who may use the pool, comma-separated; with -access-groups empty for both: everyone signed in")
	f.StringVar(&a.groups, "access-groups", "", "groups whose members may use the pool, comma-separated")
	f.IntVar(&a.perUser, "desktops-per-user", 0, "desktops of the pool one user may hold; 0: no limit beyond the portal's")
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

// runPoolUpdate is `corral-vdi-portal pool update NS/POOL`: its policy
// (the flags given change; the rest of the policy stays as it is), who may use
// the pool and what one user may hold of it.
func runPoolUpdate(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "pool update", "NS/POOL [policy flags as pool create's: -idle-timeout D, -watch W, -network N, ...] [-access-users L,..] [-access-groups G,..] [-desktops-per-user N] [-standby N | -standby-min N -standby-max M] [-standby-schedule S]")
	f.Examples = `  corral-vdi-portal pool update local/demo -idle-timeout 1h -watch consent
  corral-vdi-portal pool update local/exam -network none -access-groups students
  corral-vdi-portal pool update local/office -standby-min 1 -standby-max 20 -standby-schedule "mon-fri 08:00-18:00 10 Europe/Berlin"`
	acc := accessFlags(f)
	pol := policyFlags(f)
	sb := standbyFlags(f)
	arg, path, err := f.parseRef(args, "POOL")
	if err != nil {
		return err
	}
	body := api.PoolPatch{Access: acc.access(), Limits: acc.limits()}
	if body.Standby, err = sb.standby(); err != nil {
		return err
	}
	if body.StandbySchedule, err = sb.standbySchedule(); err != nil {
		return err
	}
	var policy api.Policy
	if given, err := pol.apply(&policy); err != nil {
		return err
	} else if given {
		body.Policy = &policy
	}
	if body == (api.PoolPatch{}) {
		return errors.New("pool update: say what to change: " + policyFlagNames + "; -access-users, -access-groups, -desktops-per-user, -standby, -standby-min/-standby-max or -standby-schedule")
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	if body.Policy != nil {
		// PATCH replaces the whole policy: start from the pool's own.
		ns, name, _ := strings.Cut(arg, "/")
		p, err := findPool(ctx, c, ns, name)
		if err != nil {
			return err
		}
		policy = api.PolicyOf(p.Policy)
		if _, err := pol.apply(&policy); err != nil {
			return err
		}
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
	saved := ""
	if body.Policy != nil {
		saved = "policy saved; "
	}
	return f.done(raw, "pool %s/%s: %sfor %s; %s; standby %s; schedule %s", p.Namespace, p.Name, saved, p.Access, per, p.Standby, p.StandbySchedule)
}

// splitList returns the items of a comma-separated list, without blanks.
func splitList(s string) []string {
	items := strings.Split(s, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return slices.DeleteFunc(items, func(v string) bool { return v == "" })
}
