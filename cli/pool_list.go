package cli

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The seed's walkthrough: pool list (here), assign POOL USER and unassign
// (assign.go), connect (connect.go).
// Each goes through the same API the web UI uses, so a claim made in the
// browser shows here and the other way round.

// runPoolList is `corral-vdi-portal pool list [NS/POOL]`: one row per
// desktop with its holder (or free, or resetting), power and since when
// it is held.
func runPoolList(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "pool list", "[NS/POOL] [-json]")
	f.Examples = `  corral-vdi-portal pool list
  corral-vdi-portal pool list local/demo -json`
	pos, err := f.parseFlags(args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		f.Usage()
		return usagef("pool list takes at most one NS/POOL, got %q", pos)
	}
	var ns, pool string
	if len(pos) == 1 {
		if _, err := ref(pos[0], "POOL"); err != nil {
			return err
		}
		ns, pool, _ = strings.Cut(pos[0], "/")
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	if pool != "" {
		if _, err := findPool(ctx, c, ns, pool); err != nil {
			return err
		}
	}
	ds, err := allDesktops(ctx, c)
	if err != nil {
		return err
	}
	keep := []vdi.Desktop{}
	for _, d := range ds {
		if pool == "" || (d.Namespace == ns && d.Pool == pool) {
			keep = append(keep, d)
		}
	}
	if f.JSON {
		raw, err := json.Marshal(keep)
		if err != nil {
			return err
		}
		return PrintJSON(e.Out, raw)
	}
	return poolListTable(f, keep)
}

// poolListTable prints ds as pool list's table.
func poolListTable(f *Flags, ds []vdi.Desktop) error {
	rows := make([][]string, 0, len(ds))
	for _, d := range ds {
		holder := holderText(d)
		power := string(d.Power)
		if d.Reason != "" {
			power += ": " + d.Reason
		}
		rows = append(rows, []string{d.Namespace + "/" + d.Name, d.Pool, holder, power, stamp(d.ClaimedAt)})
	}
	return table(f.env.Out, []string{"DESKTOP", "POOL", "HOLDER", "POWER", "SINCE"}, rows)
}

// holderText says who holds d: a login, "free", or "resetting (RULE)"
// while it is made fresh or stopped after its claim ended.
func holderText(d vdi.Desktop) string {
	switch {
	case d.Resetting != "":
		return "resetting (" + d.Resetting + ")"
	case d.Holder == "":
		return "free"
	}
	return d.Holder
}

// allDesktops lists every desktop, sorted by namespace and name.
func allDesktops(ctx context.Context, c *adminClient) ([]vdi.Desktop, error) {
	var ds []vdi.Desktop
	if _, err := c.get(ctx, "/api/vdi/desktops?all=1", &ds); err != nil {
		return nil, err
	}
	slices.SortFunc(ds, func(a, b vdi.Desktop) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return ds, nil
}

// findPool returns pool ns/name, or a not-found error naming the pools.
func findPool(ctx context.Context, c *adminClient, ns, name string) (vdi.PoolStatus, error) {
	var pools []vdi.PoolStatus
	if _, err := c.get(ctx, "/api/vdi/pools", &pools); err != nil {
		return vdi.PoolStatus{}, err
	}
	var names []string
	for _, p := range pools {
		if p.Namespace == ns && p.Name == name {
			return p, nil
		}
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return vdi.PoolStatus{}, notFoundf("there is no pool %s/%s (pools: %s); see `corral-vdi-portal pools`", ns, name, orNone(names))
}

// orNone joins names, or says none.
func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
