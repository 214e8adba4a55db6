// Package testvm finds the tiny VM image local vm pools boot in tests: the
// build of this checkout's scripts/vm-image.sh, by the script's own cache
// key. The cache is shared by every checkout on the machine, and its
// `current` link is whichever of them built last, possibly with another
// script (another guest, another set of modules).
package testvm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Image returns the folder (vmlinuz, initramfs.gz) of the image this
// checkout's scripts/vm-image.sh names, building it on first use; the
// script honours CORRAL_VDI_VM_IMAGE_CACHE. The answer is kept for the
// process.
func Image() (string, error) { return image() }

var image = sync.OnceValues(func() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return Build(filepath.Join(root, "scripts", "vm-image.sh"))
})

// Build runs the vm-image script at path and returns the folder it
// prints; the error carries what the script said.
func Build(path string) (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("bash", path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("testvm: %s: %v: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// moduleRoot is the folder of the go.mod above the working directory (a
// test's package folder).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testvm: no go.mod above the working directory")
		}
		dir = parent
	}
}
