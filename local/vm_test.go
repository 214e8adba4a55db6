package local

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestVM_BootAdoptStop boots the tiny image under QEMU (TCG here unless KVM
// works), sees its serial line speak, adopts it as a restarted portal
// would, and stops it through the adopted handle.
func TestVM_BootAdoptStop(t *testing.T) {
	if _, err := lookQEMU(); err != nil {
		t.Skip(err)
	}
	img, err := FindVMImage(os.Getenv("CORRAL_VDI_VM_IMAGE"))
	if err != nil {
		t.Skipf("%v (make vm-image builds it)", err)
	}
	dir, err := os.MkdirTemp("", "cvm")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := slog.New(slog.DiscardHandler)

	start := time.Now()
	v, err := StartVM(ctx, "vm-test", dir, img, log)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	if len(v.Password()) < 16 {
		t.Errorf("Password() = %q; want a random password", v.Password())
	}
	if err := v.speaksWithin(ctx, 90*time.Second); err != nil {
		t.Fatalf("guest said nothing on its serial line: %v", err)
	}
	t.Logf("serial line spoke %v after start", time.Since(start).Round(100*time.Millisecond))

	a, err := AdoptVM("vm-test", dir, log)
	if err != nil {
		t.Fatalf("AdoptVM of a running guest: %v", err)
	}
	if a.SerialAddr() != v.SerialAddr() || a.VNCAddr() != v.VNCAddr() {
		t.Errorf("adopted addresses %s %s; want %s %s", a.SerialAddr(), a.VNCAddr(), v.SerialAddr(), v.VNCAddr())
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-v.Done(): // the original handle sees QEMU go too
	case <-time.After(10 * time.Second):
		t.Fatal("QEMU still running after Stop")
	}
	if _, err := os.Stat(filepath.Join(dir, vmRecordName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after Stop: %v; want it removed", vmRecordName, err)
	}
	if _, err := AdoptVM("vm-test", dir, log); !errors.Is(err, ErrNotRunning) {
		t.Errorf("AdoptVM after Stop = %v; want ErrNotRunning", err)
	}
}
