package portal

import (
	"flag"
	"fmt"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// UploadConfig bounds what the Files panel writes into desktops.
type UploadConfig struct {
	// MaxFile caps one uploaded file, Quota all of one desktop's ~/Uploads.
	MaxFile, Quota int64
}

// uploadFlags registers the upload settings and returns what checks them
// after parsing.
func uploadFlags(fs *flag.FlagSet, c *Config, env func(name, def string) string) func() error {
	var maxFile, quota string
	fs.StringVar(&maxFile, "upload-max", env("CORRAL_VDI_UPLOAD_MAX", "512MiB"), "largest file a user may upload into a desktop's ~/Uploads, e.g. 100MiB or 2GiB (CORRAL_VDI_UPLOAD_MAX)")
	fs.StringVar(&quota, "upload-quota", env("CORRAL_VDI_UPLOAD_QUOTA", "2GiB"), "what one desktop's ~/Uploads may hold in all; an upload past it is refused until files are moved out (CORRAL_VDI_UPLOAD_QUOTA)")
	return func() error {
		var err error
		for _, f := range []struct {
			name, in string
			out      *int64
			def      int64
		}{{"CORRAL_VDI_UPLOAD_MAX", maxFile, &c.Uploads.MaxFile, vdi.DefaultUploadMax}, {"CORRAL_VDI_UPLOAD_QUOTA", quota, &c.Uploads.Quota, vdi.DefaultUploadQuota}} {
			if *f.out, err = parseBytes(f.in); err != nil || *f.out < 0 {
				return fmt.Errorf("%s: %q is not a size like 512MiB", f.name, f.in)
			}
		}
		return nil
	}
}
