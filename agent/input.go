package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// buttons are RFB's pointer button bits.
var buttons = map[string]byte{"": 1, "left": 1, "middle": 2, "right": 4}

// inputTools are the tools that point, type and fill the clipboard.
var inputTools = []tool{
	def(vdi.ScopeAct, &mcp.Tool{Name: "move", Description: "Move the pointer."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in Point) (*mcp.CallToolResult, any, error) {
			return s.inputResult(s.call(ctx, id, "move", in.Desktop, say(fmt.Sprintf("%d,%d", in.X, in.Y)), input, func(ctx context.Context, _ vdi.Desktop, st *seat) error {
				x, y := clamp(st, in.X, in.Y)
				return st.v.Pointer(x, y, 0)
			}))
		}),
	def(vdi.ScopeAct, &mcp.Tool{Name: "click", Description: "Click a mouse button at a point."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in ClickArgs) (*mcp.CallToolResult, any, error) {
			b, ok := buttons[in.Button]
			if !ok {
				return nil, nil, vdi.Errorf(vdi.EInvalid, "", "button %q: use left, middle or right", in.Button)
			}
			return s.inputResult(s.call(ctx, id, "click", in.Desktop, say(fmt.Sprintf("%s %d,%d", in.Button, in.X, in.Y)), input, func(ctx context.Context, _ vdi.Desktop, st *seat) error {
				return clicks(ctx, st, in.X, in.Y, b, 1)
			}))
		}),
	def(vdi.ScopeAct, &mcp.Tool{Name: "double_click", Description: "Double-click the left button at a point."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in Point) (*mcp.CallToolResult, any, error) {
			return s.inputResult(s.call(ctx, id, "double_click", in.Desktop, say(fmt.Sprintf("%d,%d", in.X, in.Y)), input, func(ctx context.Context, _ vdi.Desktop, st *seat) error {
				return clicks(ctx, st, in.X, in.Y, 1, 2)
			}))
		}),
	def(vdi.ScopeAct, &mcp.Tool{Name: "drag", Description: "Press the left button at one point, move to another and let go."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in DragArgs) (*mcp.CallToolResult, any, error) {
			detail := fmt.Sprintf("%d,%d to %d,%d", in.FromX, in.FromY, in.ToX, in.ToY)
			return s.inputResult(s.call(ctx, id, "drag", in.Desktop, say(detail), input, func(ctx context.Context, _ vdi.Desktop, st *seat) error {
				fx, fy := clamp(st, in.FromX, in.FromY)
				tx, ty := clamp(st, in.ToX, in.ToY)
				steps := []struct {
					x, y int
					b    byte
				}{{fx, fy, 0}, {fx, fy, 1}, {(fx + tx) / 2, (fy + ty) / 2, 1}, {tx, ty, 1}, {tx, ty, 0}}
				for _, p := range steps {
					if ctx.Err() != nil && p.b != 0 {
						continue // cut: only let go
					}
					if err := st.v.Pointer(p.x, p.y, p.b); err != nil {
						return err
					}
					pause()
				}
				return ctx.Err()
			}))
		}),
	def(vdi.ScopeAct, &mcp.Tool{Name: "scroll", Description: "Turn the mouse wheel at a point."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in ScrollArgs) (*mcp.CallToolResult, any, error) {
			return s.inputResult(s.call(ctx, id, "scroll", in.Desktop, say(fmt.Sprintf("%d at %d,%d", in.Clicks, in.X, in.Y)), input, func(ctx context.Context, _ vdi.Desktop, st *seat) error {
				b := byte(16) // wheel down
				if in.Clicks < 0 {
					b = 8
				}
				return clicks(ctx, st, in.X, in.Y, b, min(abs(in.Clicks), 50))
			}))
		}),
	def(vdi.ScopeAct, &mcp.Tool{Name: "type_text", Description: "Type text (any Unicode; a newline presses Enter)."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in TextArgs) (*mcp.CallToolResult, any, error) {
			if len([]rune(in.Text)) > maxText {
				return nil, nil, vdi.Errorf(vdi.ETooLarge, "", "text of %d characters: type at most %d per call", len([]rune(in.Text)), maxText)
			}
			detail := func(d vdi.Desktop) string { return typed(d, in.Text) }
			return s.inputResult(s.call(ctx, id, "type_text", in.Desktop, detail, input, func(ctx context.Context, _ vdi.Desktop, st *seat) error {
				for _, r := range in.Text {
					if err := tap(ctx, st, []uint32{runeKeysym(r)}); err != nil {
						return err
					}
				}
				return nil
			}))
		}),
	def(vdi.ScopeAct, &mcp.Tool{Name: "press_keys", Description: "Press chords one after another, such as [\"ctrl+alt+t\"] or [\"Enter\"]."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in KeysArgs) (*mcp.CallToolResult, any, error) {
			var chords [][]uint32
			for _, k := range in.Keys {
				c, err := chord(k)
				if err != nil {
					return nil, nil, err
				}
				chords = append(chords, c)
			}
			if len(chords) == 0 || len(chords) > 100 {
				return nil, nil, vdi.Errorf(vdi.EInvalid, "", "keys: press 1 to 100 chords per call")
			}
			return s.inputResult(s.call(ctx, id, "press_keys", in.Desktop, say(strings.Join(in.Keys, " ")), input, func(ctx context.Context, _ vdi.Desktop, st *seat) error {
				for _, c := range chords {
					if err := tap(ctx, st, c); err != nil {
						return err
					}
				}
				return nil
			}))
		}),
	def(vdi.ScopeAct, &mcp.Tool{Name: "write_clipboard", Description: "Put text on the desktop's clipboard, where the pool lets text into the desktop."},
		func(s *Seat, ctx context.Context, id vdi.Identity, in TextArgs) (*mcp.CallToolResult, any, error) {
			if len([]rune(in.Text)) > maxText*64 {
				return nil, nil, vdi.Errorf(vdi.ETooLarge, "", "text of %d characters is too long for the clipboard", len([]rune(in.Text)))
			}
			return s.inputResult(s.call(ctx, id, "write_clipboard", in.Desktop, say(fmt.Sprintf("(%d characters)", len([]rune(in.Text)))), input, func(ctx context.Context, d vdi.Desktop, st *seat) error {
				if !d.Console.Clipboard.ToDesktop() {
					return errClipboard(d, "into")
				}
				return st.v.SetCutText(in.Text)
			}))
		}),
}

// inputResult answers an input tool's call.
func (s *Seat) inputResult(err error) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, err
	}
	return text("done"), nil, nil
}

// clicks presses and releases button b n times at x, y, until ctx ends.
func clicks(ctx context.Context, st *seat, x, y int, b byte, n int) error {
	x, y = clamp(st, x, y)
	if err := st.v.Pointer(x, y, 0); err != nil {
		return err
	}
	for range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := st.v.Pointer(x, y, b); err != nil {
			return err
		}
		pause()
		if err := st.v.Pointer(x, y, 0); err != nil {
			return err
		}
		pause()
	}
	return nil
}

// tap presses the keys of a chord in order and releases them in reverse;
// a ctx that ended presses none.
func tap(ctx context.Context, st *seat, keys []uint32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := st.v.Key(k, true); err != nil {
			return err
		}
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if err := st.v.Key(keys[i], false); err != nil {
			return err
		}
	}
	return nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
