package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// runUSB is `corral-vdi-portal usb list|redir`.
func runUSB(ctx context.Context, e Env, args []string) error {
	return runGroup(ctx, e, "usb", args, []subcommand{{"list", runUSBList}, {"redir", runUSBRedir}})
}

// usbDevice is a USB device of this machine as sysfs shows it.
type usbDevice struct {
	ID           string `json:"id"` // VID:PID, what --device takes
	Bus          string `json:"bus"`
	Device       string `json:"device"`
	Manufacturer string `json:"manufacturer,omitempty"`
	Product      string `json:"product,omitempty"`
	Path         string `json:"sysfs"`
}

// defaultUSBSysfs is where Linux lists USB devices.
const defaultUSBSysfs = "/sys/bus/usb/devices"

// runUSBList is `corral-vdi-portal usb list`: the USB devices of this
// machine, read from sysfs, without root hubs.
func runUSBList(ctx context.Context, e Env, args []string) error {
	f := NewFlags(e, "usb list", "[-json]")
	f.Examples = `  corral-vdi-portal usb list
  corral-vdi-portal usb list -json | jq -r '.[].id'`
	if _, err := f.ParseArgs(args); err != nil {
		return err
	}
	root := e.Getenv("CORRAL_VDI_USB_SYSFS") // tests; default the kernel's
	if root == "" {
		root = defaultUSBSysfs
	}
	devs, err := listUSB(root)
	if err != nil {
		return err
	}
	if f.JSON {
		if devs == nil {
			devs = []usbDevice{}
		}
		raw, err := json.Marshal(devs)
		if err != nil {
			return err
		}
		return PrintJSON(e.Out, raw)
	}
	if len(devs) == 0 {
		fmt.Fprintf(e.Out, "no USB devices on this machine (%s lists none); plug one in, or check that this is not a container without /sys/bus/usb\n", root)
		return nil
	}
	rows := make([][]string, 0, len(devs))
	for _, d := range devs {
		rows = append(rows, []string{d.ID, d.Bus + "-" + d.Device, d.Manufacturer, d.Product})
	}
	return table(e.Out, []string{"DEVICE", "BUS-DEV", "MANUFACTURER", "PRODUCT"}, rows)
}

// listUSB reads the devices under root (a sysfs /sys/bus/usb/devices),
// sorted by bus and device number. A missing root means none.
func listUSB(root string) ([]usbDevice, error) {
	entries, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("usb list: %w", err)
	}
	var out []usbDevice
	for _, ent := range entries {
		name := ent.Name()
		if strings.Contains(name, ":") || strings.HasPrefix(name, "usb") {
			continue // interfaces (1-1:1.0) and root hubs (usb1)
		}
		dir := filepath.Join(root, name)
		read := func(attr string) string {
			b, _ := os.ReadFile(filepath.Join(dir, attr))
			return strings.TrimSpace(strings.Map(Printable, string(b)))
		}
		vid, pid := read("idVendor"), read("idProduct")
		if vid == "" || pid == "" {
			continue
		}
		out = append(out, usbDevice{ID: vid + ":" + pid, Bus: read("busnum"), Device: read("devnum"),
			Manufacturer: read("manufacturer"), Product: read("product"), Path: dir})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bus != out[j].Bus {
			return out[i].Bus < out[j].Bus
		}
		return out[i].Device < out[j].Device
	})
	return out, nil
}

// deviceRE is what --device takes: VID:PID in hex, as `usb list` shows.
var deviceRE = regexp.MustCompile(`^[0-9a-fA-F]{4}:[0-9a-fA-F]{4}$`)

// usbWarning is what attaching a device means, shown before it happens.
const usbWarning = `Attaching %s to %s:
  - the device leaves this machine: the desktop's guest drives it over the network;
  - it is exclusive to the guest while attached: nothing here can use it;
  - the VM cannot live-migrate while a device is attached;
  - the guest is trusted with the device: a security key or smartcard answers whatever runs there.
`

// confirm shows what attaching means and asks; yes skips the question.
func confirm(e Env, device, desktop string, yes bool) error {
	fmt.Fprintf(e.ErrOut, usbWarning, device, desktop)
	if yes {
		return nil
	}
	if e.In == nil {
		return usagef("nobody to ask for confirmation: pass --yes")
	}
	fmt.Fprint(e.ErrOut, "Attach it? [y/N] ")
	line, err := bufio.NewReader(e.In).ReadString('\n')
	if err != nil && err != io.EOF {
		return err
	}
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return refusef("not attached: you did not confirm")
	}
	return nil
}
