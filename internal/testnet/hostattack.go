package testnet

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// HostAttack is the scene of a desktop reaching for the host: a listener
// of the host's on [::] (every address, both families), a listener beyond
// the host (in the namespace of a Net), and the host's addresses to try.
type HostAttack struct {
	*Net
	Host, Beyond *Listener
	// Targets name each host address to try, as a URL's host: the
	// second address (Net's host end) and, where the host has one, the
	// link-local address of its interface with the default route.
	Targets map[string]string
}

// NewHostAttack sets the scene on a Net of its own (see New).
func NewHostAttack(t testing.TB) *HostAttack {
	t.Helper()
	a := &HostAttack{Net: New(t), Host: Listen(t, "[::]:0")}
	a.InOutside(t, func() { a.Beyond = Listen(t, a.Outside+":0") })
	a.Targets = map[string]string{"second-address": a.Net.Host}
	if ll, dev := HostLinkLocal(); ll != "" {
		a.Targets["link-local"] = "[" + ll + "%" + dev + "]"
	} else {
		t.Log("the host's default route has no link-local address: that row is not run")
	}
	return a
}

// UDP has run (a desktop's shell) send a datagram to the host's listener
// through target, then one beyond the host, and reports whether the
// first arrived by the time the second did (pasta sends them in order;
// one refused is refused at once).
func (a *HostAttack) UDP(t testing.TB, target string, run func(script string)) bool {
	t.Helper()
	before, control := a.Host.Datagrams(), a.Beyond.Datagrams()
	run(fmt.Sprintf("echo probe > /dev/udp/%s/%d; echo probe > /dev/udp/%s/%d", strings.Trim(target, "[]"), a.Host.Port, a.Outside, a.Beyond.Port))
	for deadline := time.Now().Add(30 * time.Second); a.Beyond.Datagrams() == control; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the datagram beyond the host never arrived")
		}
	}
	return a.Host.Datagrams() > before
}

// HostLinkLocal returns the IPv6 link-local address of the host's
// interface with the default route, and that interface's name (the name
// pasta gives a desktop's interface), or "" when it has none.
func HostLinkLocal() (addr, dev string) {
	out, _ := exec.Command("ip", "-o", "route", "show", "default").Output()
	f := strings.Fields(string(out))
	for i := range f {
		if f[i] == "dev" && i+1 < len(f) {
			dev = f[i+1]
			break
		}
	}
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return "", ""
	}
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() == nil && ip.IP.IsLinkLocalUnicast() {
			return ip.IP.String(), dev
		}
	}
	return "", ""
}
