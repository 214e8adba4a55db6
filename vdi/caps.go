package vdi

import (
	"cmp"
	"slices"
)

// Caps says what one console of a member can do. The portal offers the
// most capable console first: a protocol is only as good as the server
// behind it (freerdp-shadow speaks RDP but carries no clipboard and keeps
// its size; a Windows VM's own RDP server does both).
type Caps struct {
	// Display: it shows a desktop (not only text).
	Display bool `json:"display"`
	// Clipboard: text copies both ways through the console's own channel.
	Clipboard bool `json:"clipboard"`
	// Resize: the desktop follows the browser window's size.
	Resize bool `json:"resize"`
	// Unicode: its keyboard types any character, not only a US keyboard's
	// (TigerVNC's Xvnc maps Unicode keysyms to keys of its own; Windows
	// takes RDP's Unicode keyboard events). QEMU's VNC maps keysyms
	// through a US keymap and freerdp-shadow drops Unicode events. Input
	// methods, Type as keys and phones' keyboards need it for any
	// character past ASCII. The platform says it, never the page.
	Unicode bool `json:"unicode,omitempty"`
	// Screens: the desktop's server gives each of the console's browser
	// windows a screen of its own (Xvnc: one RandR output each).
	Screens bool `json:"screens,omitempty"`
	// Heads: how many heads a virtual machine's display has, each
	// served by a VNC server of its own (a local VM's virtio-vga), so
	// that each of the console's browser windows shows one head: the
	// console's own window the first. 0 or 1: one head (KubeVirt gives
	// a VM one display), and the console shows one screen unless Split.
	Heads int `json:"heads,omitempty"`
	// Split: the desktop has one display whose size its server takes
	// (SetDesktopSize: QEMU passes it to the guest's display), so the
	// console's browser windows each show a part of one desktop as wide
	// as they are together: one wide framebuffer split across windows (a
	// KubeVirt VM, whose VMI has one display and one VNC stream). The
	// guest sees one monitor that size, not one per window.
	Split bool `json:"split,omitempty"`
}

// protocolCaps is what each protocol's consoles can do when the backend
// says nothing else of its servers.
var protocolCaps = map[Protocol]Caps{
	ProtocolRDP:      {Display: true, Clipboard: true, Resize: true, Unicode: true},
	ProtocolVNC:      {Display: true, Clipboard: true, Resize: true},
	ProtocolSerial:   {},
	ProtocolTerminal: {Resize: true},
}

// protocolOrder breaks ties between equally capable consoles: RDP's
// codecs draw faster than VNC's over a slow link.
var protocolOrder = []Protocol{ProtocolRDP, ProtocolVNC, ProtocolSerial, ProtocolTerminal}

// CapsOf returns what the member's console p can do: what the backend says
// of its server, else the protocol's usual.
func (m Member) CapsOf(p Protocol) Caps {
	if c, ok := m.ConsoleCaps[p]; ok {
		return c
	}
	return protocolCaps[p]
}

// score weighs caps: a display first, then the clipboard, then resizing.
func (c Caps) score() int {
	s := 0
	if c.Display {
		s += 4
	}
	if c.Clipboard {
		s += 2
	}
	if c.Resize {
		s++
	}
	return s
}

// Ranked returns the member's consoles, most capable first.
func (m Member) Ranked() []Protocol {
	ps := slices.Clone(m.Protocols)
	slices.SortStableFunc(ps, func(a, b Protocol) int {
		if d := m.CapsOf(b).score() - m.CapsOf(a).score(); d != 0 {
			return d
		}
		return cmp.Compare(orderOf(a), orderOf(b))
	})
	return ps
}

// orderOf is p's place in protocolOrder (unknown protocols last).
func orderOf(p Protocol) int {
	if i := slices.Index(protocolOrder, p); i >= 0 {
		return i
	}
	return len(protocolOrder)
}
