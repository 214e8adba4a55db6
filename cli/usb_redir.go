package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// usbredirectInstall is the hint when Debian's usbredirect is missing.
const usbredirectInstall = "usbredirect is not installed: `sudo apt-get install usbredirect` (Debian, Ubuntu), `dnf install usbredir-tools` (Fedora)"

// virtctlInstall is the hint when virtctl is missing on the admin's machine.
const virtctlInstall = "virtctl is not on PATH: download virtctl-<version>-linux-amd64 of your KubeVirt's release from " +
	"https://github.com/kubevirt/kubevirt/releases into PATH as virtctl, or `kubectl krew install virt` and run it as kubectl virt"

// runUSBRedir is `corral-vdi-portal usb redir`: on the user's machine with
// --portal, usbredirect bridged to the portal's /ws/usbredir, signed in as
// the user; without --portal, the admin path: virtctl usbredir for the
// KubeVirt VM that --user holds.
func runUSBRedir(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "usb redir", "NS/DESKTOP --device VID:PID (--portal URL [--token T] | --user U) [--yes]")
	portalURL := f.String("portal", "", "the portal's URL, e.g. https://vdi.example.ts.net: share a device of this machine with your desktop")
	device := f.String("device", "", "the device as VID:PID, as \"corral-vdi-portal usb list\" shows it")
	token := f.String("token", "", "the USB token from the desktop's page, when the portal signs you in with OIDC (CORRAL_VDI_USB_TOKEN)")
	user := f.String("user", "", "admin path: the user who holds the desktop; runs virtctl usbredir with your kubeconfig")
	yes := f.Bool("yes", false, "attach without asking")
	f.Examples = `  # on your machine, the portal reached through tailscale serve (you are signed in by it):
  corral-vdi-portal usb redir --portal https://vdi.example.ts.net vdi/win-3 --device 1050:0407
  # with OIDC: the command with a fresh token is on the desktop's page
  corral-vdi-portal usb redir --portal https://vdi.example vdi/win-3 --device 1050:0407 --token ...
  # admin path, with kube credentials: virtctl usbredir for the VM alice holds
  corral-vdi-portal usb redir vdi/win-3 --device 1050:0407 --user alice`
	desktop, path, err := f.parseRef(args, "DESKTOP")
	if err != nil {
		return err
	}
	if !deviceRE.MatchString(*device) {
		return usagef("--device %q is not VID:PID in hex, e.g. 1050:0407 (see `corral-vdi-portal usb list`)", *device)
	}
	if *token == "" {
		*token = e.Getenv("CORRAL_VDI_USB_TOKEN")
	}
	switch {
	case *portalURL != "" && *user != "":
		return usagef("usb redir: --portal (your own device) and --user (admin path) exclude each other")
	case *portalURL != "":
		return usbRedirPortal(ctx, e, *portalURL, path, desktop, *device, *token, *yes)
	case *user != "":
		return usbRedirAdmin(ctx, f, desktop, *device, *user, *yes)
	}
	f.Usage()
	return usagef("usb redir wants --portal URL (your device, through the portal) or --user U (admin path, virtctl)")
}

// usbRedirPortal dials the portal's USB websocket for desktop, then runs
// usbredirect against a loopback port bridged to it.
func usbRedirPortal(ctx context.Context, e Env, base, path, desktop, device, token string, yes bool) error {
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--portal %q is not the portal's http(s) URL", base)
	}
	bin, err := exec.LookPath("usbredirect")
	if err != nil {
		return refusef("%s", usbredirectInstall)
	}
	if err := confirm(e, device, desktop, yes); err != nil {
		return err
	}
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path += "/ws/usbredir/" + path
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	ws, res, err := d.DialContext(ctx, u.String(), h)
	if err != nil {
		return wsRefusal(res, err, u.String())
	}
	defer ws.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	cmd := exec.CommandContext(ctx, bin, "--device", device, "--to", ln.Addr().String())
	cmd.Stdout, cmd.Stderr = e.ErrOut, e.ErrOut
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("usbredirect: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c
		}
	}()
	var conn net.Conn
	select {
	case conn = <-accepted:
	case err := <-exited:
		return fmt.Errorf("usbredirect ended before it connected (%v): is %s plugged in, and may you open it (udev rules, or run as root)?", err, device)
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("usbredirect did not connect within 30s; run it with -v 5 by hand to see why")
	}
	fmt.Fprintf(e.Out, "attached %s to %s; Ctrl-C detaches it\n", device, desktop)
	bridge(ws, conn)
	conn.Close()
	ws.Close()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
	fmt.Fprintf(e.Out, "detached %s from %s\n", device, desktop)
	return nil
}

// bridge copies bytes between ws (binary messages) and conn until either
// side ends.
func bridge(ws *websocket.Conn, conn net.Conn) {
	var once sync.Once
	stop := func() { once.Do(func() { conn.Close(); ws.Close() }) }
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer stop()
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			if n > 0 && ws.WriteMessage(websocket.BinaryMessage, buf[:n]) != nil {
				return
			}
			if err != nil {
				ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "detached"), time.Now().Add(time.Second))
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		defer stop()
		for {
			_, r, err := ws.NextReader()
			if err != nil {
				return
			}
			if _, err := io.Copy(conn, r); err != nil {
				return
			}
		}
	}()
	wg.Wait()
}

// wsRefusal turns a refused websocket handshake into the portal's message.
func wsRefusal(res *http.Response, err error, to string) error {
	if res == nil {
		return fmt.Errorf("cannot reach %s: %w", to, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	e := &api.Error{Status: res.StatusCode}
	if json.Unmarshal(body, e) != nil || e.Msg == "" {
		e.Msg = fmt.Sprintf("the portal refused the USB stream: %s", res.Status)
	}
	return e
}

// usbRedirAdmin is the seed's admin path: it checks over the admin socket
// that user holds desktop and that it is a running KubeVirt VM, then runs
// `virtctl usbredir VID:PID VMI -n NS` with the admin's own kubeconfig.
func usbRedirAdmin(ctx context.Context, f *Flags, desktop, device, user string, yes bool) error {
	ns, name, _ := strings.Cut(desktop, "/")
	c, err := f.client()
	if err != nil {
		return err
	}
	var d vdi.Desktop
	if _, err := c.get(ctx, "/api/vdi/desktops/"+pathOf(ns, name), &d); err != nil {
		return err
	}
	if d.Holder != user {
		holder := d.Holder
		if holder == "" {
			holder = "nobody"
		}
		return conflictf("%s is held by %s, not %s: attach devices only to the holder's desktop (`corral-vdi-portal assign %s %s` first)", desktop, holder, user, desktop, user)
	}
	p, err := findPool(ctx, c, ns, d.Pool)
	if err != nil {
		return err
	}
	if p.Kind != vdi.KindVM {
		return refusef("not supported: USB needs a KubeVirt or QEMU VM, and %s is a %s desktop", desktop, p.Kind)
	}
	if ns == "local" {
		return refusef("not supported here: %s is a QEMU VM of the local backend, not a KubeVirt VM; on the user's machine run "+
			"`corral-vdi-portal usb redir --portal URL %s --device %s`", desktop, desktop, device)
	}
	if d.Power != vdi.PowerRunning {
		return conflictf("%s is %s: start it first", desktop, d.Power)
	}
	bin, err := exec.LookPath("virtctl")
	if err != nil {
		return refusef("%s", virtctlInstall)
	}
	if err := confirm(f.env, device, desktop, yes); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "usbredir", device, name, "-n", ns)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = f.env.Out, f.env.ErrOut, f.env.In
	fmt.Fprintf(f.env.ErrOut, "running %s\n", strings.Join(cmd.Args, " "))
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("virtctl usbredir failed (exit %d); it needs kube credentials that may use virtualmachineinstances/usbredir in %s, and clientPassthrough on the VM", ee.ExitCode(), ns)
		}
		return err
	}
	return nil
}
