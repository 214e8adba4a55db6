// Package vdi holds the domain of corral-vdi-portal: pools of identical
// desktops, the members in them, and the claims (Leases) that give a member
// to one user. Backends (local, Kubernetes) and storage implement the small
// interfaces declared here; the Service applies the claim rules on top.
package vdi

import (
	"time"
)

// Kind is what a pool's members are made of.
type Kind string

// Pool kinds.
const (
	KindVM Kind = "vm" // virtual machines cloned from a golden VM (QEMU locally, KubeVirt on a cluster)
	KindCT Kind = "ct" // container or session desktops made from an image or template
)

// Mode says what reclaiming a member does to it.
type Mode string

// Pool modes.
const (
	ModePersistent Mode = "persistent" // reclaim stops the member and keeps its disks
	ModeEphemeral  Mode = "ephemeral"  // reclaim recreates the member from its source
)

// Power is the power state of a member.
type Power string

// Power states.
const (
	PowerStopped  Power = "stopped"
	PowerStarting Power = "starting"
	PowerRunning  Power = "running"
	PowerStopping Power = "stopping"
	PowerFailed   Power = "failed"
)

// warm reports whether a member of power p is warm: running, or on its
// way (a claim of it needs no start).
func (p Power) warm() bool {
	return p == PowerRunning || p == PowerStarting
}

// Protocol is a console protocol a member may offer.
type Protocol string

// Console protocols, in the order the portal prefers them.
const (
	ProtocolRDP      Protocol = "rdp"
	ProtocolVNC      Protocol = "vnc"
	ProtocolSerial   Protocol = "serial"
	ProtocolTerminal Protocol = "terminal"
	// ProtocolUSBRedir is a usbredir stream to a VM (KubeVirt's usbredir
	// subresource, QEMU's usb-redir chardev): never a console members
	// list, only what /ws/usbredir carries.
	ProtocolUSBRedir Protocol = "usbredir"
	// ProtocolAudio is a desktop's sound (/ws/audio): never a console
	// members list either.
	ProtocolAudio Protocol = "audio"
)

// Policy holds a pool's reclaim timers and what its consoles allow. Zero
// means "use the global default" for DisconnectGrace, "off" for MaxSession
// and IdleTimeout, and "allowed" for the clipboard and file transfer.
type Policy struct {
	DisconnectGrace time.Duration `json:"disconnectGrace,omitempty"`
	MaxSession      time.Duration `json:"maxSession,omitempty"`
	IdleTimeout     time.Duration `json:"idleTimeout,omitempty"`
	// Clipboard says which way console clipboards may carry text.
	Clipboard Clipboard `json:"clipboard,omitempty"`
	// FileTransfer says which way files may move: the console's Files
	// panel (local desktops) and RDP's file streams.
	FileTransfer FileTransfer `json:"fileTransfer,omitzero"`
	// Audio says whether consoles may play the desktop's sound.
	Audio Toggle `json:"audio,omitempty"`
	// Record records every console session of the pool's desktops; a
	// console the portal cannot record (RDP) is not offered. RecordInput
	// also records what the user types.
	Record      bool `json:"record,omitempty"`
	RecordInput bool `json:"recordInput,omitempty"`
	// OwnRecordings lets users play back their own recorded sessions of
	// the pool (My sessions); otherwise only admins play recordings.
	OwnRecordings bool `json:"ownRecordings,omitempty"`
	// Watch says whether an admin may watch a holder's console and how
	// the holder learns of it (notify, consent, off).
	Watch Watch `json:"watch,omitempty"`
	// Network is what the pool's desktops may reach: on the local
	// backend empty means the portal's default (CORRAL_VDI_DESKTOP_NETWORK);
	// on Kubernetes a CT pool's "outbound" desktops are labelled for the
	// pool namespace kit's egress policy, and the others reach nothing.
	Network Network `json:"network,omitempty"`
}

// Network is a pool's network policy.
type Network string

// Network policies: a desktop's network is never the host's.
const (
	NetworkOutbound Network = "outbound" // out through a user-mode stack; the host's loopback out of reach
	NetworkNone     Network = "none"     // only a loopback of its own
)

// networkText says n in an audit line: empty is the portal's default.
func networkText(n Network) string {
	if n == "" {
		return "default"
	}
	return string(n)
}

// Pool is a named set of identical members.
type Pool struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Kind      Kind   `json:"kind"`
	Mode      Mode   `json:"mode"`
	// Source is the golden VM, image or local template members are made from.
	Source string `json:"source"`
	Size   int    `json:"size"`
	Policy Policy `json:"policy"`
	// Access says who may see and claim from the pool; Limits caps what
	// one user may hold of it.
	Access Access `json:"access"`
	Limits Limits `json:"limits"`
	// Standby is how many free members are kept powered on and ready, so
	// that a claim needs no boot: a number, or a range that follows demand
	// (see KeepStandby).
	Standby Standby `json:"standby"`
	// StandbySchedule raises the standby within working hours.
	StandbySchedule StandbySchedule `json:"standbySchedule,omitzero"`
	// LicensesAcknowledged records that the admin holds the licences a pool
	// of more than one Windows desktop needs (Windows Enterprise E3/E5 or VDA
	// per user or device, or RDS CALs). The Kubernetes backend refuses such a
	// pool without it; the local backend ignores it.
	LicensesAcknowledged bool `json:"licensesAcknowledged,omitempty"`
	// Closed says why only admins may use the pool whatever its Access
	// says: its definition (access, limits, policy) cannot be read or its
	// members disagree on it. A pool's definition fails closed.
	Closed string `json:"closed,omitempty"`
}

// Allows reports whether id may see and claim from p: admins always, others
// when p is not Closed and its Access lets them in; a token only on the
// pools it names.
func (p Pool) Allows(id Identity) bool {
	if !id.Reaches(p.Namespace, p.Name) {
		return false
	}
	return id.Admin || p.Closed == "" && p.Access.Allows(id)
}

// Member is one desktop of a pool, as its backend sees it.
type Member struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Pool      string `json:"pool"`
	Power     Power  `json:"power"`
	// Reason explains a failed power state in words a user can act on.
	Reason string `json:"reason,omitempty"`
	// Protocols lists the consoles the member offers while running, best first.
	Protocols []Protocol `json:"protocols,omitempty"`
	// ConsoleCaps says, for consoles whose server can do less (or more)
	// than its protocol usually does, what it can do (see Caps).
	ConsoleCaps map[Protocol]Caps `json:"consoleCaps,omitempty"`
	// AssignedTo is the holder the member itself shows (on Kubernetes its
	// corral.dev/vdi-assigned-to mark), a presentation copy of the claim.
	// It is read only to migrate members assigned before Leases existed:
	// such a member goes to that user on their first claim, to nobody else.
	AssignedTo string `json:"assignedTo,omitempty"`
	// Shown is the holder the member's claim mirror shows (see
	// ClaimMirror), "" for none; the reclaim loop keeps it in step with the
	// Lease. Unlike AssignedTo it never gives anyone the member.
	Shown string `json:"-"`
	// Closed says why the member does not carry its pool's definition (a
	// clone that landed without it, a hand edit): no claim takes it until
	// the pool's definition is written on it again.
	Closed string `json:"closed,omitempty"`
}

// Ref names a member: every desktop is addressed as namespace/member.
type Ref struct {
	Namespace string
	Name      string
}

// String returns "namespace/name".
func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// Ref returns the member's address.
func (m Member) Ref() Ref { return Ref{m.Namespace, m.Name} }
