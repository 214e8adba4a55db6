package cli

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// runPools is `corral-vdi-portal pools`: every pool with its free count.
func runPools(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "pools", "[-json]")
	if _, err := f.ParseArgs(args); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var pools []vdi.PoolStatus
	raw, err := c.get(ctx, "/api/vdi/pools", &pools)
	if err != nil {
		return err
	}
	if f.JSON {
		return PrintJSON(e.Out, raw)
	}
	rows := make([][]string, 0, len(pools))
	for _, p := range pools {
		rows = append(rows, []string{p.Namespace, p.Name, string(p.Kind), string(p.Mode), p.Source,
			strconv.Itoa(p.Size), strconv.Itoa(p.Free), strconv.Itoa(p.Claimed), strconv.Itoa(p.Resetting)})
	}
	return table(e.Out, []string{"NAMESPACE", "NAME", "KIND", "MODE", "SOURCE", "SIZE", "FREE", "CLAIMED", "RESETTING"}, rows)
}

// runPool is `corral-vdi-portal pool create|list|update|resize|delete`.
func runPool(ctx context.Context, e Env, args []string) error {
	return runGroup(ctx, e, "pool", args, []subcommand{
		{"create", runPoolCreate}, {"list", runPoolList}, {"update", runPoolUpdate}, {"resize", runPoolResize}, {"delete", runPoolDelete},
	})
}

// runPoolCreate is `corral-vdi-portal pool create`.
func runPoolCreate(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "pool create", "NAME|-name N [-n|-namespace NS] [--from S] [--ephemeral] [-kind vm|ct] [-mode persistent|ephemeral] [-source S] [-size K] [-disconnect-grace D] [-max-session D] [-idle-timeout D] [-clipboard both|to-desktop|from-desktop|off] [-files both|upload|download|off] [-audio=false] [-record [-record-input]] [-own-recordings] [-watch notify|consent|off] [-network outbound|none] [-access-users L,..] [-access-groups G,..] [-desktops-per-user N] [-standby N | -standby-min N -standby-max M] [-standby-schedule S] [-i-have-licenses]")
	var req api.PoolCreate
	acc := accessFlags(f)
	sb := standbyFlags(f)
	f.StringVar(&req.Name, "name", "", "the pool's name, a DNS label")
	f.StringVar(&req.Namespace, "namespace", "", "the pool's namespace; default local (the embedded default's)")
	f.StringVar(&req.Namespace, "n", "", "short for -namespace")
	f.StringVar((*string)(&req.Kind), "kind", "", "vm (cloned from a golden VM) or ct (containers or session desktops); default ct")
	f.StringVar((*string)(&req.Mode), "mode", "", "persistent (reclaim stops a desktop, keeps its disk) or ephemeral (reclaim recreates it); default ephemeral")
	f.StringVar(&req.Source, "source", "", "golden VM, image or local template the desktops are made from")
	var from string
	f.StringVar(&from, "from", "", "the golden VM the desktops are cloned from (a vm pool unless -kind says otherwise; \"session\" is the local backend's session desktop)")
	ephemeral := f.Bool("ephemeral", false, "same as -mode ephemeral")
	f.IntVar(&req.Size, "size", 1, "how many desktops")
	pol := policyFlags(f)
	f.BoolVar(&req.LicensesAcknowledged, "i-have-licenses", false, "you hold the licences Windows desktops need (Windows Enterprise E3/E5 or VDA, or RDS CALs): required for a Windows golden VM pool above one desktop")
	f.Examples = `  corral-vdi-portal pool create demo --from session --size 3 --ephemeral
  corral-vdi-portal pool create win --from win11-golden --kind vm --size 5 -n vdi --i-have-licenses
  corral-vdi-portal pool create lab -kind vm -source tiny -size 2 -mode persistent -idle-timeout 1h
  corral-vdi-portal pool create exam --from session --size 20 -record -own-recordings -network none -files off
  corral-vdi-portal pool create office --from session --size 40 -standby-min 1 -standby-max 20 -standby-schedule "mon-fri 08:00-18:00 10 Europe/Berlin"`
	pos, err := f.parseFlags(args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 1:
		f.Usage()
		return usagef("pool create takes one NAME, got %q", pos)
	case len(pos) == 1 && req.Name != "" && req.Name != pos[0]:
		return usagef("pool create: NAME %q and -name %q differ; give one", pos[0], req.Name)
	case len(pos) == 1:
		req.Name = pos[0]
	case req.Name == "":
		f.Usage()
		return usagef("pool create wants the pool's NAME")
	}
	if from != "" {
		if req.Source != "" && req.Source != from {
			return usagef("pool create: --from %q and -source %q differ; give one", from, req.Source)
		}
		req.Source = from
		if req.Kind == "" && from != "session" {
			req.Kind = vdi.KindVM // the walkthrough's GOLDEN is a VM
		}
	}
	if _, err := pol.apply(&req.Policy); err != nil {
		return err
	}
	if *ephemeral {
		if req.Mode != "" && req.Mode != vdi.ModeEphemeral {
			return usagef("pool create: --ephemeral and -mode %s contradict each other", req.Mode)
		}
		req.Mode = vdi.ModeEphemeral
	}
	if a := acc.access(); a != nil {
		req.Access = *a
	}
	if l := acc.limits(); l != nil {
		req.Limits = *l
	}
	if st, err := sb.standby(); err != nil {
		return err
	} else if st != nil {
		req.Standby = *st
	}
	if sched, err := sb.standbySchedule(); err != nil {
		return err
	} else if sched != nil {
		req.StandbySchedule = *sched
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodPost, "/api/vdi/pools", req)
	if err == nil {
		raw, err = c.awaitPool(ctx, e.ErrOut, raw)
	}
	if err != nil {
		return err
	}
	var p vdi.PoolStatus
	if err := jsonInto(raw, &p); err != nil {
		return err
	}
	return f.done(raw, "created pool %s/%s: %d %s %s desktops", p.Namespace, p.Name, p.Size, p.Mode, p.Kind)
}

// runPoolResize is `corral-vdi-portal pool resize NS/POOL SIZE`.
func runPoolResize(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "pool resize", "NS/POOL SIZE")
	pos, err := f.ParseArgs(args, "NS/POOL", "SIZE")
	if err != nil {
		return err
	}
	path, err := ref(pos[0], "POOL")
	if err != nil {
		return err
	}
	size, err := strconv.Atoi(pos[1])
	if err != nil || size < 0 {
		return fmt.Errorf("SIZE %q is not a count of desktops", pos[1])
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodPatch, "/api/vdi/pools/"+path, api.PoolPatch{Size: &size})
	if err == nil {
		raw, err = c.awaitPool(ctx, e.ErrOut, raw)
	}
	if err != nil {
		return err
	}
	var p vdi.PoolStatus
	if err := jsonInto(raw, &p); err != nil {
		return err
	}
	return f.done(raw, "pool %s/%s has %d desktops (%d free)", p.Namespace, p.Name, p.Size, p.Free)
}

// runPoolDelete is `corral-vdi-portal pool delete NS/POOL`.
func runPoolDelete(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "pool delete", "NS/POOL")
	pool, path, err := f.parseRef(args, "POOL")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodDelete, "/api/vdi/pools/"+path, nil)
	if err != nil {
		return err
	}
	return f.done(raw, "deleted pool %s", pool)
}
