package agent

import (
	"context"
	"errors"
	"fmt"
	"image"
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
		Width int   `json:"width,omitempty" jsonschema:"scale the picture down to this many pixels wide; 0 for full size"`
		Crop  *Area `json:"crop,omitempty" jsonschema:"only this part of the screen, in full-size pixels (then scaled by width)"`
	}
	// Area is a rectangle of the screen in full-size pixels.
	Area struct {
		X      int `json:"x"`
		Y      int `json:"y"`
		Width  int `json:"width"`
		Height int `json:"height"`
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

// Screen is the size of the desktop's screen a screenshot was taken of.
type Screen struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

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

// sessionTools are the tools that claim, look at, wait on and release a
// desktop.
var sessionTools = []tool{
	def(vdi.ScopeSee, &mcp.Tool{Name: "list_pools", Description: "The pools this token may claim desktops from, with how many are free."},
		func(s *Seat, ctx context.Context, id vdi.Identity, _ struct{}) (*mcp.CallToolResult, Pools, error) {
			ps, err := s.cfg.Desktops.Pools(ctx, id)
			if err != nil {
				return nil, Pools{}, err
			}
			out := Pools{Pools: []PoolInfo{}}
			for _, p := range ps {
				out.Pools = append(out.Pools, PoolInfo{Pool: p.Namespace + "/" + p.Name, Kind: string(p.Kind), Size: p.Size, Free: p.Free})
			}
			return nil, out, nil
		}),
	def(vdi.ScopeClaim, &mcp.Tool{Name: "claim_desktop", Description: "Claim a desktop of a pool (the same one again if this user holds one) and start it; answers its name and screen size."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in PoolArgs) (*mcp.CallToolResult, Claimed, error) {
			ns, pool, ok := strings.Cut(in.Pool, "/")
			if !ok {
				return nil, Claimed{}, vdi.Errorf(vdi.EInvalid, "", "pool %q: name it namespace/pool, as list_pools does", in.Pool)
			}
			held, err := s.beforeClaim(ctx, id, ns, pool)
			if err != nil {
				return nil, Claimed{}, err
			}
			// Her claim lock is let go beside the rest, never before
			// the answer (after_answer.go).
			cctx, letGo := vdi.WithAnswerFirst(ctx)
			d, err := s.cfg.Desktops.Claim(cctx, id, ns, pool)
			startAlongside(ctx, letGo)
			if err != nil {
				return nil, Claimed{}, err
			}
			if err := vdi.AgentBarred(d, false); err != nil {
				return nil, Claimed{}, err
			}
			ref := vdi.Ref{Namespace: d.Namespace, Name: d.Name}
			s.audit(ctx, id, "claim_desktop", ref, "pool "+in.Pool)
			if err := s.cfg.Desktops.MarkAgent(ctx, id, ref); err != nil {
				s.cfg.Log.Warn("agent not noted on the claim", "desktop", ref, "err", err)
			}
			if !held {
				if err := s.afterClaim(ctx, id, ref); err != nil {
					return nil, Claimed{}, err
				}
			}
			st, err := s.seats.get(ctx, ref, id)
			if err != nil {
				return nil, Claimed{}, err
			}
			w, h := st.v.Size()
			return nil, Claimed{Desktop: ref.String(), Width: w, Height: h}, nil
		}),
	def(vdi.ScopeClaim, &mcp.Tool{Name: "release_desktop", Description: "Release the desktop: it is stopped or made fresh, as its pool says."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in Where) (*mcp.CallToolResult, any, error) {
			ref, err := parseRef(in.Desktop)
			if err != nil {
				return nil, nil, err
			}
			if d, err := s.cfg.Desktops.Desktop(ctx, id, ref); err == nil {
				if err := vdi.AgentBarred(d, false); err != nil {
					return nil, nil, err // a stopped agent leaves the desktop as the person found it
				}
			}
			s.seats.close(ref)
			if err := s.cfg.Desktops.Release(ctx, id, ref, ""); err != nil {
				return nil, nil, err
			}
			s.audit(ctx, id, "release_desktop", ref, "")
			return text("released %s", ref), nil, nil
		}),
	def(vdi.ScopeSee, &mcp.Tool{Name: "screenshot", Description: "A PNG of the desktop's screen now, or of a part of it (crop), optionally scaled down."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in ShotArgs) (*mcp.CallToolResult, Screen, error) {
			sh := shot{width: max(in.Width, 0)}
			if c := in.Crop; c != nil {
				if c.Width <= 0 || c.Height <= 0 {
					return nil, Screen{}, vdi.Errorf(vdi.EInvalid, "", "crop %dx%d at %d,%d: give it a width and height above 0", c.Width, c.Height, c.X, c.Y)
				}
				sh.crop = image.Rect(c.X, c.Y, c.X+c.Width, c.Y+c.Height)
			}
			var png []byte
			var out Screen
			err := s.call(ctx, id, "screenshot", in.Desktop, say(""), screen, func(ctx context.Context, _ vdi.Desktop, st *seat) (err error) {
				out.Width, out.Height = st.v.Size()
				if !sh.crop.Empty() && sh.crop.Intersect(image.Rect(0, 0, out.Width, out.Height)).Empty() {
					return vdi.Errorf(vdi.EInvalid, "", "crop %v is off the %dx%d screen", sh.crop, out.Width, out.Height)
				}
				png, _, err = st.screenshot(sh)
				return err
			})
			if err != nil {
				return nil, Screen{}, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: png, MIMEType: "image/png"},
				&mcp.TextContent{Text: fmt.Sprintf("screen %dx%d; click coordinates are in full-size pixels", out.Width, out.Height)}}}, out, nil
		}),
	def(vdi.ScopeSee, &mcp.Tool{Name: "wait_for_change", Description: "Wait until the screen changes from the last screenshot (or from now), or the timeout passes; answers whether it changed."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in WaitArgs) (*mcp.CallToolResult, any, error) {
			d := time.Duration(in.TimeoutMS) * time.Millisecond
			if d <= 0 {
				d = 10 * time.Second
			}
			d = min(d, time.Minute)
			var changed bool
			err := s.call(ctx, id, "wait_for_change", in.Desktop, say(""), free, func(ctx context.Context, _ vdi.Desktop, st *seat) (err error) {
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
		}),
	def(vdi.ScopeSee, &mcp.Tool{Name: "read_clipboard", Description: "The desktop's clipboard text, where the pool lets text out of the desktop."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in Where) (*mcp.CallToolResult, any, error) {
			var cut string
			err := s.call(ctx, id, "read_clipboard", in.Desktop, say(""), free, func(ctx context.Context, d vdi.Desktop, st *seat) error {
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
		}),
}

// errClipboard is the refusal of a clipboard the pool's policy closes.
func errClipboard(d vdi.Desktop, way string) error {
	return &vdi.Error{Code: vdi.EForbidden, Err: errors.New("clipboard policy " + string(d.Console.Clipboard)),
		Msg: "The pool's clipboard policy (" + string(d.Console.Clipboard) + ") lets no text " + way + " the desktop."}
}
