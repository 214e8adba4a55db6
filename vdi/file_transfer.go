package vdi

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// FileTransfer says which way files may move between the user's machine
// and a pool's desktops: Upload into a desktop, Download out of it. Each
// is on unless turned off. In JSON it is true or false (both ways), or
// {"upload": bool, "download": bool}; it is written as a plain boolean
// whenever both ways agree, so readers of the older form keep working.
type FileTransfer struct {
	Upload   Toggle `json:"upload,omitempty"`
	Download Toggle `json:"download,omitempty"`
}

// FileTransferOf returns the policy that allows both ways when on, neither
// when off.
func FileTransferOf(on bool) FileTransfer {
	return FileTransfer{Upload: ToggleOf(on), Download: ToggleOf(on)}
}

// IsZero reports whether f was never set (for omitzero).
func (f FileTransfer) IsZero() bool { return f == FileTransfer{} }

// Any reports whether files may move at all, either way.
func (f FileTransfer) Any() bool { return f.Upload.On() || f.Download.On() }

// String says in words what f allows: "on", "off", "upload only" or
// "download only".
func (f FileTransfer) String() string {
	switch {
	case f.Upload.On() && f.Download.On():
		return "on"
	case f.Upload.On():
		return "upload only"
	case f.Download.On():
		return "download only"
	}
	return "off"
}

// MarshalJSON implements json.Marshaler.
func (f FileTransfer) MarshalJSON() ([]byte, error) {
	if f.Upload.On() == f.Download.On() {
		return json.Marshal(f.Upload.On())
	}
	return json.Marshal(struct {
		Upload   bool `json:"upload"`
		Download bool `json:"download"`
	}{f.Upload.On(), f.Download.On()})
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *FileTransfer) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '{' {
		var on bool
		if err := json.Unmarshal(b, &on); err != nil {
			return fmt.Errorf("fileTransfer: want true, false or {\"upload\": bool, \"download\": bool}: %w", err)
		}
		*f = FileTransferOf(on)
		return nil
	}
	var ways struct {
		Upload   *bool `json:"upload"`
		Download *bool `json:"download"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ways); err != nil {
		return fmt.Errorf("fileTransfer: want true, false or {\"upload\": bool, \"download\": bool}: %w", err)
	}
	*f = FileTransfer{}
	if ways.Upload != nil {
		f.Upload = ToggleOf(*ways.Upload)
	}
	if ways.Download != nil {
		f.Download = ToggleOf(*ways.Download)
	}
	return nil
}
