package api

import "github.com/corral-dev/corral-vdi-portal/vdi"

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
	Standby   int        `json:"standby,omitempty"`
	// LicensesAcknowledged is the admin's word that they hold the licences
	// a pool of Windows desktops needs (vdi.Pool.LicensesAcknowledged).
	LicensesAcknowledged bool `json:"licensesAcknowledged"`
}

// PoolPatch is the body of PATCH /api/vdi/pools/{ns}/{pool}: what it
// holds changes, what it leaves out stays.
type PoolPatch struct {
	Size    *int        `json:"size,omitempty"`
	Policy  *Policy     `json:"policy,omitempty"`
	Access  *vdi.Access `json:"access,omitempty"`
	Limits  *vdi.Limits `json:"limits,omitempty"`
	Standby *int        `json:"standby,omitempty"`
}
