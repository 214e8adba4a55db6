package vdi

import (
	"encoding/json"
	"fmt"
)

// Clipboard says which way text may cross a console's clipboard. The zero
// value means ClipboardBoth.
type Clipboard string

// Clipboard policies.
const (
	ClipboardBoth        Clipboard = "both"
	ClipboardToDesktop   Clipboard = "to-desktop"   // the browser's text may reach the desktop, not back
	ClipboardFromDesktop Clipboard = "from-desktop" // the desktop's text may reach the browser, not in
	ClipboardOff         Clipboard = "off"
)

// ToDesktop reports whether text may go from the browser to the desktop.
func (c Clipboard) ToDesktop() bool {
	return c == "" || c == ClipboardBoth || c == ClipboardToDesktop
}

// FromDesktop reports whether text may go from the desktop to the browser.
func (c Clipboard) FromDesktop() bool {
	return c == "" || c == ClipboardBoth || c == ClipboardFromDesktop
}

// Valid reports whether c is one of the clipboard policies or empty.
func (c Clipboard) Valid() bool {
	switch c {
	case "", ClipboardBoth, ClipboardToDesktop, ClipboardFromDesktop, ClipboardOff:
		return true
	}
	return false
}

// Watch says what a holder's console does when someone else (an admin)
// opens it alongside them. The zero value means WatchNotify.
type Watch string

// Watch policies.
const (
	WatchNotify  Watch = "notify"  // the holder's console says who is watching
	WatchConsent Watch = "consent" // the holder allows each watch first
	WatchOff     Watch = "off"     // nobody but the holder opens its consoles
)

// Valid reports whether w is one of the watch policies or empty.
func (w Watch) Valid() bool {
	switch w {
	case "", WatchNotify, WatchConsent, WatchOff:
		return true
	}
	return false
}

// Toggle is a setting that is on unless turned off: its zero value means
// on, so that pools written before the setting existed keep it. In JSON it
// is true or false (and absent when it was never set).
type Toggle uint8

// Toggle values.
const (
	ToggleDefault Toggle = iota // on
	ToggleOn
	ToggleOff
)

// On reports whether the setting is on.
func (t Toggle) On() bool { return t != ToggleOff }

// MarshalJSON implements json.Marshaler.
func (t Toggle) MarshalJSON() ([]byte, error) { return json.Marshal(t.On()) }

// UnmarshalJSON implements json.Unmarshaler.
func (t *Toggle) UnmarshalJSON(b []byte) error {
	var on bool
	if err := json.Unmarshal(b, &on); err != nil {
		return fmt.Errorf("want true or false: %w", err)
	}
	*t = ToggleOff
	if on {
		*t = ToggleOn
	}
	return nil
}

// ToggleOf returns the Toggle for on.
func ToggleOf(on bool) Toggle {
	if on {
		return ToggleOn
	}
	return ToggleOff
}

// ConsolePolicy is what a pool's policy allows a console of one of its
// desktops: the part of Policy the console page and the relay apply.
type ConsolePolicy struct {
	Clipboard Clipboard `json:"clipboard"`
	// FileTransfer says files may move at all (RDP's file streams);
	// Upload and Download say which way (the Files panel).
	FileTransfer bool `json:"fileTransfer"`
	Upload       bool `json:"upload"`
	Download     bool `json:"download"`
	// Audio says the desktop's sound may play in the browser.
	Audio bool `json:"audio"`
	// Watch says how an admin may watch a console of the pool.
	Watch Watch `json:"watch"`
}

// Console returns the console part of p with its defaults filled in.
func (p Policy) Console() ConsolePolicy {
	c := ConsolePolicy{Clipboard: p.Clipboard, FileTransfer: p.FileTransfer.Any(),
		Upload: p.FileTransfer.Upload.On(), Download: p.FileTransfer.Download.On(), Audio: p.Audio.On()}
	if c.Clipboard == "" {
		c.Clipboard = ClipboardBoth
	}
	if c.Watch = p.Watch; c.Watch == "" {
		c.Watch = WatchNotify
	}
	return c
}
