package local

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Xvnc (TigerVNC 1.12) types a keysym its keymap lacks by binding it to a
// spare key, a keycode without symbols (its default keymap has 19); once
// they are taken it drops every new keysym ("Failure adding new keysym"
// in its log), so an input method's user could type about twenty distinct
// characters a session. So the console's connection counts the keysyms
// that may each have taken a spare since the last reset and, before one
// more would go past them, clears the spare keys Xvnc bound
// (`xmodmap -e "keycode N ="`): every other key of the layout stays as it
// is. That key waits the few milliseconds two xmodmap runs take.
// The keys of the last few characters, and of any typed in the last
// keymapSettle, stay bound: a client that has not yet read their key
// presses (a busy xterm) translates them with the keymap it holds when
// it does, and would find them cleared or bound to a later character. (Reloading
// the whole keymap with setxkbmap frees them too, but clears those and
// every other key at once.)

const (
	// keymapMargin is how many spare keys are left for a client the
	// portal does not see (a viewer run inside the desktop).
	keymapMargin = 3
	// keymapKeep is how many of the last characters keep their keys.
	keymapKeep = 8
	// keymapGuess is how many keysyms may take a spare before the next
	// try when the keymap could not be read.
	keymapGuess = 16
	// keymapWait bounds one xmodmap run.
	keymapWait = 10 * time.Second
	// keymapSettle is how long a character's key stays bound after it
	// was typed before a reset may clear it: a client reads a key press
	// with the keymap it holds when it gets to it, and a busy one lags.
	keymapSettle = 300 * time.Millisecond
)

// xRunner runs xmodmap with args on the desktop's display and returns its
// output.
type xRunner func(ctx context.Context, args ...string) (string, error)

// keymap keeps the spare keys of one desktop's Xvnc free.
type keymap struct {
	xmodmap xRunner // nil: never reset
	fresh   bool    // the desktop started with this portal: nothing bound its spares yet
	log     *slog.Logger

	mu     sync.Mutex
	spares map[int]bool         // the keycodes Xvnc may bind; nil until the keymap is read
	room   int                  // keysyms that may take a spare before the next reset
	spent  []uint32             // keysyms that may hold a spare (since the last reset, and the kept ones), oldest first
	down   map[uint32]bool      // such keysyms pressed and not yet released
	used   map[uint32]time.Time // when each spent keysym was last pressed
}

// newKeymap returns the keymap of a desktop started by this portal
// (fresh) or adopted from an earlier one, whose keys this one did not see.
// Its first keysym that may take a spare reads the keymap first.
func newKeymap(xmodmap xRunner, fresh bool, log *slog.Logger) *keymap {
	return &keymap{xmodmap: xmodmap, fresh: fresh, log: log, down: map[uint32]bool{}, used: map[uint32]time.Time{}}
}

// mayTakeSpare reports whether Xvnc may need a spare key for keysym: any
// but printable ASCII and the function and modifier keys (0xff00-0xffff),
// which every layout has. Counting a keysym the layout has (ä on a German
// one) only makes a reset come sooner.
func mayTakeSpare(keysym uint32) bool {
	return !(keysym >= 0x20 && keysym <= 0x7e) && !(keysym >= 0xff00 && keysym <= 0xffff)
}

// beforeKey notes a key event on its way to Xvnc and, before a keysym
// that would go past the spares, resets them. It never resets while a
// key that may hold a spare is down: that key's keycode would be cleared
// under it.
func (k *keymap) beforeKey(keysym uint32, down bool) {
	if !mayTakeSpare(keysym) {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !down {
		delete(k.down, keysym)
		return
	}
	k.down[keysym] = true
	defer func() { k.used[keysym] = time.Now() }()
	if slices.Contains(k.spent, keysym) {
		return
	}
	if len(k.spent) >= k.room && len(k.down) == 1 && k.xmodmap != nil {
		k.reset()
	}
	k.spent = append(k.spent, keysym)
}

// reset clears the spare keys Xvnc bound but those of the last
// keymapKeep keysyms, and counts the room again. A failing reset is tried
// again only after keymapGuess new keysyms, not at every key.
func (k *keymap) reset() {
	begin := time.Now()
	n := keymapKeep
	if k.spares != nil { // half the room at most
		n = max(min(n, (len(k.spares)-keymapMargin)/2), 0)
	}
	keep := k.spent[max(len(k.spent)-n, 0):]
	// The keys cleared were typed before those kept; the newest of them
	// gets keymapSettle to be read first (this key waits meanwhile).
	var newest time.Time
	for _, s := range k.spent[:len(k.spent)-len(keep)] {
		if t := k.used[s]; t.After(newest) {
			newest = t
		}
		delete(k.used, s)
	}
	if wait := keymapSettle - time.Since(newest); wait > 0 {
		time.Sleep(wait)
	}
	k.spent = slices.Clone(keep)
	k.room = len(keep) + keymapGuess
	ctx, cancel := context.WithTimeout(context.Background(), keymapWait)
	defer cancel()
	out, err := k.xmodmap(ctx, "-pk")
	if err != nil {
		k.log.Warn("desktop keymap not read: new characters may be dropped", "err", err)
		return
	}
	rows := parseKeymap(out)
	if k.spares == nil {
		k.spares = map[int]bool{}
		for code, syms := range rows {
			// An adopted desktop's spares may be bound already.
			if len(syms) == 0 || !k.fresh && xvncBound(syms) {
				k.spares[code] = true
			}
		}
	}
	var args []string
	for code := range k.spares {
		syms := rows[code]
		if len(syms) > 0 && xvncBound(syms) && !slices.ContainsFunc(syms, func(s uint32) bool { return slices.Contains(keep, s) }) {
			args = append(args, "-e", "keycode "+strconv.Itoa(code)+" =")
		}
	}
	if len(args) > 0 {
		if _, err := k.xmodmap(ctx, args...); err != nil {
			k.log.Warn("desktop keymap's spare keys not cleared: new characters may be dropped", "err", err)
			return
		}
	}
	k.room = max(len(k.spares)-keymapMargin, len(keep)+1)
	k.log.Info("desktop keymap's spare keys cleared", "cleared", len(args)/2, "spares", len(k.spares),
		"elapsed", time.Since(begin).Round(time.Millisecond))
}

// xvncBound reports whether a key's keysyms are ones Xvnc may have bound
// to a spare: every one may take a spare (a layout that binds a spare
// keycode, as Japanese binds 97 and 132 to backslash, keeps it).
func xvncBound(syms []uint32) bool {
	for _, s := range syms {
		if !mayTakeSpare(s) {
			return false
		}
	}
	return true
}

// parseKeymap reads `xmodmap -pk`: each keycode's keysyms but NoSymbol.
// Lines look like "    248    \t0x00e9 (eacute)\t0x00c9 (Eacute)\t…".
func parseKeymap(out string) map[int][]uint32 {
	rows := map[int][]uint32{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		code, err := strconv.Atoi(f[0])
		if err != nil {
			continue // a heading
		}
		syms := []uint32{}
		for _, s := range f[1:] {
			v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
			if err == nil && strings.HasPrefix(s, "0x") && v != 0 {
				syms = append(syms, uint32(v))
			}
		}
		rows[code] = syms
	}
	return rows
}

// keymapConn is a connection to a desktop's Xvnc that shows each key
// event to the desktop's keymap first (rfb.KeyWatcher).
type keymapConn struct {
	net.Conn
	keys *keymap
}

// BeforeKey implements rfb.KeyWatcher.
func (c keymapConn) BeforeKey(keysym uint32, down bool) { c.keys.beforeKey(keysym, down) }

// dialVNC connects to the desktop's Xvnc through its keymap.
func (d *Desktop) dialVNC(ctx context.Context) (net.Conn, error) {
	c, err := d.dialSocket(ctx, d.VNCSocket())
	if err != nil {
		return nil, err
	}
	return keymapConn{Conn: c, keys: d.keys}, nil
}

// xmodmapRunner returns what runs xmodmap as the desktop's user on its
// display, or nil without xmodmap.
func (d *Desktop) xmodmapRunner() xRunner {
	bin, err := exec.LookPath("xmodmap")
	if err != nil {
		d.log.Warn("desktop keymap never reset: an input method types about 20 distinct characters a session",
			"err", fmt.Errorf("xmodmap not found: install the Debian package x11-xserver-utils"))
		return nil
	}
	return func(ctx context.Context, args ...string) (string, error) {
		var out strings.Builder
		err := d.runX(ctx, nil, &out, bin, args...)
		return out.String(), err
	}
}
