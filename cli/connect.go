package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// runConnect is `corral-vdi-portal connect NS/DESKTOP`: the one-click URL
// and each console with the protocol it would pick and the path it would
// take (direct, peer, apiserver).
func runConnect(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "connect", "NS/DESKTOP [-json]")
	f.Examples = `  corral-vdi-portal connect local/demo-1
  corral-vdi-portal connect vdi/win-3 -json`
	_, path, err := f.parseRef(args, "DESKTOP")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var a api.Connect
	raw, err := c.get(ctx, "/api/vdi/desktops/"+path+"/connect?paths=1", &a)
	if err != nil {
		return err
	}
	base := c.portalURL
	page := base + "/desktops/" + path
	if f.JSON {
		out := map[string]any{"url": page}
		if err := json.Unmarshal(raw, &out); err != nil {
			return err
		}
		out["url"] = page
		buf, err := json.Marshal(out)
		if err != nil {
			return err
		}
		return PrintJSON(e.Out, buf)
	}
	fmt.Fprintf(e.Out, "open %s\n\n", page)
	rows := [][]string{connectRow("best", a.ConnectOption, base)}
	for i, fb := range a.Fallbacks {
		rows = append(rows, connectRow("fallback "+strconv.Itoa(i+1), fb, base))
	}
	return table(e.Out, []string{"CHOICE", "PROTOCOL", "PATH", "WEBSOCKET"}, rows)
}

// connectRow is one console of connect's table.
func connectRow(choice string, c api.ConnectOption, base string) []string {
	p := c.Path
	if p == "" {
		p = "none: " + c.PathError
	}
	ws := c.WebSocket
	if strings.HasPrefix(base, "http") {
		ws = "ws" + strings.TrimPrefix(base, "http") + ws
	}
	return []string{choice, string(c.Protocol), p, ws}
}
