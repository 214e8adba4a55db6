package vdi

import "time"

// FileInfo describes a file moved in or out of a desktop: one the user
// uploaded into ~/Uploads, or one of ~/Downloads they may download.
type FileInfo struct {
	Name     string    `json:"name"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified,omitzero"`
}

// Upload limits of the Files panel unless the configuration says
// otherwise (CORRAL_VDI_UPLOAD_MAX, CORRAL_VDI_UPLOAD_QUOTA).
const (
	DefaultUploadMax   = 512 << 20 // bytes one uploaded file may have
	DefaultUploadQuota = 2 << 30   // bytes ~/Uploads of one desktop may hold
)
