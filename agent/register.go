package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Inputs of the tools that take more than a desktop or a point.
type (
	// PoolArgs names a pool.
	PoolArgs struct {
		Pool string `json:"pool" jsonschema:"the pool as list_pools names it, namespace/pool"`
	}
	// ShotArgs asks for a screenshot.
	ShotArgs struct {
		Where
		Width int `json:"width,omitempty" jsonschema:"scale the picture down to this many pixels wide; 0 for full size"`
	}
	// ClickArgs is a click.
	ClickArgs struct {
		Point
		Button string `json:"button,omitempty" jsonschema:"left (the default), middle or right"`
	}
	// DragArgs is a drag with the left button.
	DragArgs struct {
		Where
		FromX int `json:"from_x"`
		FromY int `json:"from_y"`
		ToX   int `json:"to_x"`
		ToY   int `json:"to_y"`
	}
	// ScrollArgs is a turn of the wheel.
	ScrollArgs struct {
		Point
		Clicks int `json:"clicks" jsonschema:"wheel clicks: positive scrolls down, negative up"`
	}
	// TextArgs is text to type or put on the clipboard.
	TextArgs struct {
		Where
		Text string `json:"text"`
	}
	// KeysArgs are chords to press in turn.
	KeysArgs struct {
		Where
		Keys []string `json:"keys" jsonschema:"chords pressed one after another, such as ctrl+alt+t, Enter, ctrl+c"`
	}
	// WaitArgs bounds a wait.
	WaitArgs struct {
		Where
		TimeoutMS int `json:"timeout_ms,omitempty" jsonschema:"how long to wait at most, in milliseconds (default 10000, at most 60000)"`
	}
)

// Claimed is a desktop claim_desktop gave.
type Claimed struct {
	Desktop string `json:"desktop"`
	Width   int    `json:"width"`
	Height  int    `json:"height"`
}

// PoolInfo is a pool list_pools shows.
type PoolInfo struct {
	Pool string `json:"pool"`
	Kind string `json:"kind"`
	Size int    `json:"size"`
	Free int    `json:"free"`
}

// Pools is what list_pools answers.
type Pools struct {
	Pools []PoolInfo `json:"pools"`
}

const maxText = 4000

// addTools adds the seat's tools, acting as id, to srv.
func (s *Seat) addTools(srv *mcp.Server, id vdi.Identity) {
	mcp.AddTool(srv, &mcp.Tool{Name: "list_pools", Description: "The pools this token may claim desktops from, with how many are free."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Pools, error) {
			ps, err := s.cfg.Desktops.Pools(ctx, id)
			if err != nil {
				return nil, Pools{}, err
			}
			out := Pools{Pools: []PoolInfo{}}
			for _, p := range ps {
				out.Pools = append(out.Pools, PoolInfo{Pool: p.Namespace + "/" + p.Name, Kind: string(p.Kind), Size: p.Size, Free: p.Free})
			}
			return nil, out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "claim_desktop", Description: "Claim a desktop of a pool (the same one again if this user holds one) and start it; answers its name and screen size."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in PoolArgs) (*mcp.CallToolResult, Claimed, error) {
			ns, pool, ok := strings.Cut(in.Pool, "/")
			if !ok {
				return nil, Claimed{}, fmt.Errorf("pool %q: name it namespace/pool, as list_pools does", in.Pool)
			}
			d, err := s.cfg.Desktops.Claim(ctx, id, ns, pool)
			if err != nil {
				return nil, Claimed{}, err
			}
			ref := vdi.Ref{Namespace: d.Namespace, Name: d.Name}
			s.audit(ctx, id, "claim_desktop", ref, "pool "+in.Pool)
			if err := s.cfg.Desktops.MarkAgent(ctx, id, ref); err != nil {
				s.cfg.Log.Warn("agent not noted on the claim", "desktop", ref, "err", err)
			}
			st, err := s.seats.get(ctx, ref)
			if err != nil {
				return nil, Claimed{}, err
			}
			w, h := st.v.Size()
			return nil, Claimed{Desktop: ref.String(), Width: w, Height: h}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "release_desktop", Description: "Release the desktop: it is stopped or made fresh, as its pool says."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in Where) (*mcp.CallToolResult, any, error) {
			ref, err := parseRef(in.Desktop)
			if err != nil {
				return nil, nil, err
			}
			s.seats.close(ref)
			if err := s.cfg.Desktops.Release(ctx, id, ref, ""); err != nil {
				return nil, nil, err
			}
			s.audit(ctx, id, "release_desktop", ref, "")
			return text("released %s", ref), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "screenshot", Description: "A PNG of the desktop's screen now, optionally scaled down."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in ShotArgs) (*mcp.CallToolResult, any, error) {
			var png []byte
			var w, h int
			err := s.call(ctx, id, "screenshot", in.Desktop, say(""), screen, func(_ vdi.Desktop, st *seat) (err error) {
				png, _, err = st.screenshot(max(in.Width, 0))
				w, h = st.v.Size()
				return err
			})
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: png, MIMEType: "image/png"},
				&mcp.TextContent{Text: fmt.Sprintf("screen %dx%d; click coordinates are in full-size pixels", w, h)}}}, nil, nil
		})
	s.addInputTools(srv, id)
	mcp.AddTool(srv, &mcp.Tool{Name: "wait_for_change", Description: "Wait until the screen changes from the last screenshot (or from now), or the timeout passes; answers whether it changed."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in WaitArgs) (*mcp.CallToolResult, any, error) {
			d := time.Duration(in.TimeoutMS) * time.Millisecond
			if d <= 0 {
				d = 10 * time.Second
			}
			d = min(d, time.Minute)
			var changed bool
			err := s.call(ctx, id, "wait_for_change", in.Desktop, say(""), free, func(_ vdi.Desktop, st *seat) (err error) {
				changed, err = st.waitChange(ctx, d)
				return err
			})
			if err != nil {
				return nil, nil, err
			}
			if changed {
				return text("changed"), nil, nil
			}
			return text("no change within %v", d), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "read_clipboard", Description: "The desktop's clipboard text, where the pool lets text out of the desktop."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in Where) (*mcp.CallToolResult, any, error) {
			var cut string
			err := s.call(ctx, id, "read_clipboard", in.Desktop, say(""), free, func(d vdi.Desktop, st *seat) error {
				if !d.Console.Clipboard.FromDesktop() {
					return errClipboard(d, "out of")
				}
				cut = st.v.CutText()
				return nil
			})
			if err != nil {
				return nil, nil, err
			}
			return text("%s", cut), nil, nil
		})
}

// errClipboard is the refusal of a clipboard the pool's policy closes.
func errClipboard(d vdi.Desktop, way string) error {
	return &vdi.Error{Code: vdi.EForbidden, Err: errors.New("clipboard policy " + string(d.Console.Clipboard)),
		Msg: "The pool's clipboard policy (" + string(d.Console.Clipboard) + ") lets no text " + way + " the desktop."}
}
