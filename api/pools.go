package api

import (
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Policy is a pool policy as clients write it: Go durations such as "15m"
// or "8h" (empty means the portal default (grace) or off); the clipboard
// and file transfer are allowed unless turned off; and whether sessions
// (and keystrokes) are recorded.
type Policy struct {
	DisconnectGrace string            `json:"disconnectGrace,omitempty"`
	MaxSession      string            `json:"maxSession,omitempty"`
	IdleTimeout     string            `json:"idleTimeout,omitempty"`
	Clipboard       vdi.Clipboard     `json:"clipboard,omitempty"`
	FileTransfer    *vdi.FileTransfer `json:"fileTransfer,omitempty"`
	Audio           *bool             `json:"audio,omitempty"`
	Record          bool              `json:"record,omitempty"`
	RecordInput     bool              `json:"recordInput,omitempty"`
	OwnRecordings   bool              `json:"ownRecordings,omitempty"`
	Watch           vdi.Watch         `json:"watch,omitempty"`
	Network         vdi.Network       `json:"network,omitempty"`
}

// PoolCreate is the body of POST /api/vdi/pools.
type PoolCreate struct {
	Namespace string     `json:"namespace,omitempty"`
	Name      string     `json:"name"`
	Kind      vdi.Kind   `json:"kind,omitempty"`
	Mode      vdi.Mode   `json:"mode,omitempty"`
	Source    string     `json:"source,omitempty"`
	Size      int        `json:"size"`
	Policy    Policy     `json:"policy,omitzero"`
	Access    vdi.Access `json:"access,omitzero"`
	Limits    vdi.Limits `json:"limits,omitzero"`
	// Standby is a number of free members kept on, or {"min", "max"} to
	// follow demand; StandbySchedule raises it in working hours.
	Standby         vdi.Standby         `json:"standby,omitzero"`
	StandbySchedule vdi.StandbySchedule `json:"standbySchedule,omitzero"`
	// LicensesAcknowledged is the admin's word that they hold the licences
	// a pool of Windows desktops needs (vdi.Pool.LicensesAcknowledged).
	LicensesAcknowledged bool `json:"licensesAcknowledged"`
}

// PoolPatch is the body of PATCH /api/vdi/pools/{ns}/{pool}: what it
// holds changes, what it leaves out stays.
type PoolPatch struct {
	Size    *int         `json:"size,omitempty"`
	Policy  *Policy      `json:"policy,omitempty"`
	Access  *vdi.Access  `json:"access,omitempty"`
	Limits  *vdi.Limits  `json:"limits,omitempty"`
	Standby *vdi.Standby `json:"standby,omitempty"`
	// StandbySchedule replaces the pool's schedule; {} removes it.
	StandbySchedule *vdi.StandbySchedule `json:"standbySchedule,omitempty"`
}

// PolicyOf is p as clients write it, so that a client can change one field
// of a pool's policy and send back the rest unchanged (PATCH replaces the
// whole policy).
func PolicyOf(p vdi.Policy) Policy {
	d := func(x time.Duration) string {
		if x == 0 {
			return ""
		}
		return x.String()
	}
	ft := p.FileTransfer
	audio := p.Audio.On()
	return Policy{DisconnectGrace: d(p.DisconnectGrace), MaxSession: d(p.MaxSession), IdleTimeout: d(p.IdleTimeout),
		Clipboard: p.Clipboard, FileTransfer: &ft, Audio: &audio, Record: p.Record, RecordInput: p.RecordInput,
		OwnRecordings: p.OwnRecordings, Watch: p.Watch, Network: p.Network}
}
