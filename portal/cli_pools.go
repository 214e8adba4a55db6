package portal

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// runPools is `corral-vdi-portal pools`: every pool with its free count.
func runPools(ctx context.Context, e cliEnv, args []string) error {
	f := newCLIFlags(e, "pools", "[-json]")
	if _, err := f.parse(args); err != nil {
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
	if f.json {
		return printJSON(e.out, raw)
	}
	rows := make([][]string, 0, len(pools))
	for _, p := range pools {
		rows = append(rows, []string{p.Namespace, p.Name, string(p.Kind), string(p.Mode), p.Source,
			strconv.Itoa(p.Size), strconv.Itoa(p.Free), strconv.Itoa(p.Claimed)})
	}
	return table(e.out, []string{"NAMESPACE", "NAME", "KIND", "MODE", "SOURCE", "SIZE", "FREE", "CLAIMED"}, rows)
}

// runPool is `corral-vdi-portal pool create|resize|delete`.
func runPool(ctx context.Context, e cliEnv, args []string) error {
	const usage = "usage: corral-vdi-portal pool create|update|resize|delete ... (each takes -h)"
	if len(args) == 0 {
		return fmt.Errorf("pool wants create, update, resize or delete\n%s", usage)
	}
	switch args[0] {
	case "create":
		return runPoolCreate(ctx, e, args[1:])
	case "update":
		return runPoolUpdate(ctx, e, args[1:])
	case "resize":
		return runPoolResize(ctx, e, args[1:])
	case "delete":
		return runPoolDelete(ctx, e, args[1:])
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(e.errOut, usage)
		return nil
	}
	return fmt.Errorf("pool %s: unknown; want create, update, resize or delete", args[0])
}

// poolCreateRequest is the body of POST /api/vdi/pools.
type poolCreateRequest struct {
	Namespace            string            `json:"namespace,omitempty"`
	Name                 string            `json:"name"`
	Kind                 string            `json:"kind,omitempty"`
	Mode                 string            `json:"mode,omitempty"`
	Source               string            `json:"source,omitempty"`
	Size                 int               `json:"size"`
	Policy               map[string]string `json:"policy,omitempty"`
	Access               *vdi.Access       `json:"access,omitempty"`
	Limits               *vdi.Limits       `json:"limits,omitempty"`
	Standby              int               `json:"standby,omitempty"`
	LicensesAcknowledged bool              `json:"licensesAcknowledged"`
}

// runPoolCreate is `corral-vdi-portal pool create`.
func runPoolCreate(ctx context.Context, e cliEnv, args []string) error {
	f := newCLIFlags(e, "pool create", "-name N [-namespace NS] [-kind vm|ct] [-mode persistent|ephemeral] [-source S] [-size K] [-disconnect-grace D] [-max-session D] [-idle-timeout D] [-access-users L,..] [-access-groups G,..] [-desktops-per-user N] [-standby N] [-i-have-licenses]")
	var req poolCreateRequest
	acc := accessFlags(f)
	var grace, maxSession, idle string
	f.StringVar(&req.Name, "name", "", "the pool's name, a DNS label")
	f.StringVar(&req.Namespace, "namespace", "", "the pool's namespace; default local (the embedded default's)")
	f.StringVar(&req.Kind, "kind", "", "vm (cloned from a golden VM) or ct (containers or session desktops); default ct")
	f.StringVar(&req.Mode, "mode", "", "persistent (reclaim stops a desktop, keeps its disk) or ephemeral (reclaim recreates it); default ephemeral")
	f.StringVar(&req.Source, "source", "", "golden VM, image or local template the desktops are made from")
	f.IntVar(&req.Size, "size", 1, "how many desktops")
	f.StringVar(&grace, "disconnect-grace", "", "reclaim this long after the last console closes, e.g. 15m; default the portal's")
	f.StringVar(&maxSession, "max-session", "", "longest claim, e.g. 8h; default off")
	f.StringVar(&idle, "idle-timeout", "", "reclaim after no input this long, e.g. 1h; default off")
	f.BoolVar(&req.LicensesAcknowledged, "i-have-licenses", false, "you hold the licences Windows desktops need (Windows Enterprise E3/E5 or VDA, or RDS CALs): required for a Windows golden VM pool above one desktop")
	if _, err := f.parse(args); err != nil {
		return err
	}
	req.Access, req.Limits = acc.access(), acc.limits()
	if n := acc.standbyCount(); n != nil {
		req.Standby = *n
	}
	for k, v := range map[string]string{"disconnectGrace": grace, "maxSession": maxSession, "idleTimeout": idle} {
		if v != "" {
			if req.Policy == nil {
				req.Policy = map[string]string{}
			}
			req.Policy[k] = v
		}
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodPost, "/api/vdi/pools", req)
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
func runPoolResize(ctx context.Context, e cliEnv, args []string) error {
	f := newCLIFlags(e, "pool resize", "NS/POOL SIZE")
	pos, err := f.parse(args, "NS/POOL", "SIZE")
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
	raw, err := c.do(ctx, http.MethodPatch, "/api/vdi/pools/"+path, map[string]int{"size": size})
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
func runPoolDelete(ctx context.Context, e cliEnv, args []string) error {
	f := newCLIFlags(e, "pool delete", "NS/POOL")
	pos, err := f.parse(args, "NS/POOL")
	if err != nil {
		return err
	}
	path, err := ref(pos[0], "POOL")
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
	return f.done(raw, "deleted pool %s", pos[0])
}
