package local

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// A VM of a root portal (its own uid, namespaces and cgroup) boots again
// after a stop, which removed its cgroup; with its consoles on loopback
// ports (-vm-listen tcp) QEMU keeps the portal's network
// namespace, so the portal reaches them (in a namespace of its own, QEMU's
// ports were out of the portal's reach and the boot never listened).
func TestVM_SandboxedBootsAgain(t *testing.T) {
	img := mustVMImage(t)
	s := MustSandbox(t, "202400-202499", Limits{NProc: 300, Memory: 512 << 20})
	for _, listen := range []string{"unix", "tcp"} {
		t.Run(listen, func(t *testing.T) {
			spec := MustSandboxedSpec(t, s, "vm-again-"+listen)
			cfg := vmBoot{name: "vm-again-" + listen, dir: spec.Dir, state: spec.State, user: spec.User, img: img,
				accel: mustAccelerator(t, AccelTCG, "", t.TempDir()), log: slog.New(slog.DiscardHandler), listenTCP: listen == "tcp"}
			for boot := 1; boot <= 2; boot++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				v, err := bootVM(ctx, cfg)
				if err != nil {
					cancel()
					t.Fatalf("boot %d: %v", boot, err)
				}
				if vmNetwork(v.SerialAddr()) != listen {
					t.Errorf("boot %d: serial line at %s; want %s", boot, v.SerialAddr(), listen)
				}
				err = serialLogin(ctx, v.SerialAddr(), VMUser, v.Password())
				cancel()
				if err != nil {
					v.Stop()
					t.Fatalf("boot %d: serial login: %v", boot, err)
				}
				if err := v.Stop(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
