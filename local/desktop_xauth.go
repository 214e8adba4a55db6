package local

import (
	"crypto/rand"
	"encoding/binary"
	"os"
)

// xauthFamilyWild matches any address in an Xauthority entry.
const xauthFamilyWild = 0xFFFF

// writeXauthority writes a fresh Xauthority file at path holding one random
// MIT-MAGIC-COOKIE-1 for any host and any display: the display is only known
// once Xvnc has picked it with -displayfd, and libXau treats an empty display
// number as a wildcard. Xvnc reads the same file with -auth.
func writeXauthority(path string) error {
	cookie := make([]byte, 16)
	if _, err := rand.Read(cookie); err != nil {
		return err
	}
	var b []byte
	b = binary.BigEndian.AppendUint16(b, xauthFamilyWild)
	for _, field := range [][]byte{
		nil, // address
		nil, // display number
		[]byte("MIT-MAGIC-COOKIE-1"),
		cookie,
	} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(field)))
		b = append(b, field...)
	}
	// Remove first so a stale file with looser permissions is not reused.
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
