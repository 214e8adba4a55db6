package local

import (
	"crypto/rand"
	"encoding/binary"
)

// xauthFamilyWild matches any address in an Xauthority entry.
const xauthFamilyWild = 0xFFFF

// writeXauthority writes a fresh Xauthority file, u's, named name in dir
// (see writeFileIn), holding one random
// MIT-MAGIC-COOKIE-1 for any host and any display: the display is only known
// once Xvnc has picked it with -displayfd, and libXau treats an empty display
// number as a wildcard. Xvnc reads the same file with -auth.
func writeXauthority(dir, name string, u *DesktopUser) error {
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
	return writeFileIn(dir, name, b, u)
}
