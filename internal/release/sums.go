package release

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteSums writes out in sha256sum's format (`sha256sum -c SHA256SUMS`
// checks it), naming each file relative to out's folder.
func WriteSums(out string, files ...string) error {
	var b strings.Builder
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return fmt.Errorf("release: SHA256SUMS: %w", err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("release: SHA256SUMS: %w", err)
		}
		rel, err := filepath.Rel(filepath.Dir(out), name)
		if err != nil {
			rel = filepath.Base(name)
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), rel)
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("release: SHA256SUMS: %w", err)
	}
	return nil
}
