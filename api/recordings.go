package api

import "time"

// Recording is one recorded console session as GET /api/vdi/recordings
// lists it; End is null while the session is still recorded.
type Recording struct {
	ID       string     `json:"id"`
	Session  string     `json:"session"`
	Desktop  string     `json:"desktop"`
	User     string     `json:"user"`
	Protocol string     `json:"protocol"`
	Format   string     `json:"format"`
	Start    time.Time  `json:"start"`
	End      *time.Time `json:"end"`
	Bytes    int64      `json:"bytes"`
}
