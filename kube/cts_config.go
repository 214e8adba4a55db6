package kube

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ctPool is a CT pool as its ConfigMap declares it.
type ctPool struct {
	vdi.Pool
	cm           *corev1.ConfigMap
	members      []string       // shared with other parses when numbered (cts_members.go): read-only
	index        map[string]int // the members' places in members, when shared; nil: made when asked
	command      []string
	shell        []string
	resources    corev1.ResourceRequirements
	terminalPort int32
	runAsUser    int64 // 0: the image's user
}

// has reports whether member is one of the pool's.
func (p *ctPool) has(member string) bool {
	if p.index != nil {
		_, ok := p.index[member]
		return ok
	}
	return slices.Contains(p.members, member)
}

// memberIndex returns each member's place in the pool's members, for
// placing many names (read-only: it may be shared): has for each of a
// 1,000-member pool's Pods was a million comparisons on every claim
// (BenchmarkKubeCTMembers).
func (p *ctPool) memberIndex() map[string]int {
	if p.index != nil {
		return p.index
	}
	return indexOf(p.members)
}

// readCTPool reads a pool's ConfigMap (parseCTPool, once per version);
// the error says which key is wrong and how to write it.
func readCTPool(cm *corev1.ConfigMap) (*ctPool, error) {
	name := cm.Labels[LabelCTPool]
	d := cm.Data
	p := &ctPool{cm: cm, Pool: vdi.Pool{Namespace: cm.Namespace, Name: name, Kind: vdi.KindCT, Mode: vdi.ModeEphemeral, Source: d[CTKeyImage]}}
	bad := func(key, want string, err error) error {
		msg := fmt.Sprintf("ConfigMap %s/%s of CT pool %s: %s %q is not %s", cm.Namespace, cm.Name, name, key, d[key], want)
		if err != nil {
			msg += ": " + err.Error()
		}
		return vdi.Errorf(vdi.EInvalid, "Fix the ConfigMap (kubectl edit configmap -n "+cm.Namespace+" "+cm.Name+").", "%s.", msg)
	}
	if err := vdi.ValidName("pool", name); err != nil {
		return nil, bad("label "+LabelCTPool, "a pool name", err)
	}
	if p.Source == "" {
		return nil, bad(CTKeyImage, "an image (e.g. debian:12)", nil)
	}
	switch m := vdi.Mode(d[CTKeyMode]); m {
	case "":
	case vdi.ModeEphemeral, vdi.ModePersistent:
		p.Mode = m
	default:
		return nil, bad(CTKeyMode, "persistent or ephemeral", nil)
	}
	size := 0
	if s, ok := d[CTKeySize]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 || n > vdi.MaxPoolSize {
			return nil, bad(CTKeySize, fmt.Sprintf("a whole number from 0 to %d", vdi.MaxPoolSize), nil)
		}
		size = n
	}
	if s, ok := d[CTKeyMembers]; ok {
		for _, m := range strings.Split(s, ",") {
			if m = strings.TrimSpace(m); m != "" {
				p.members = append(p.members, m)
			}
		}
		if _, hasSize := d[CTKeySize]; hasSize && size != len(p.members) {
			return nil, bad(CTKeySize, fmt.Sprintf("the number of members listed (%d); resize through the portal, or remove the %s key", len(p.members), CTKeyMembers), nil)
		}
	} else {
		m := numberedMembers(name, size)
		p.members, p.index = m.names, m.index
	}
	p.Size = len(p.members)
	for key, dst := range map[string]*[]string{CTKeyCommand: &p.command, CTKeyShell: &p.shell} {
		if s := d[key]; s != "" {
			if err := json.Unmarshal([]byte(s), dst); err != nil || len(*dst) == 0 {
				return nil, bad(key, `a JSON array of strings, e.g. ["/bin/bash", "-l"]`, err)
			}
		}
	}
	if len(p.shell) == 0 {
		p.shell = defaultShell
	}
	if s := d[CTKeyResources]; s != "" {
		if err := json.Unmarshal([]byte(s), &p.resources); err != nil {
			return nil, bad(CTKeyResources, `resource requirements as JSON, e.g. {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}}`, err)
		}
	}
	if s := d[CTKeyPolicy]; s != "" {
		pol, err := parsePolicy(s)
		if err != nil {
			return nil, bad(CTKeyPolicy, `a policy as JSON, e.g. {"disconnectGrace": "15m", "maxSession": "8h", "idleTimeout": "1h"}`, err)
		}
		p.Policy = pol
	}
	if err := parseCTAccess(d, &p.Pool, bad); err != nil {
		return nil, err
	}
	readStandby(d[CTKeyStandby], d[CTKeyStandbySchedule], &p.Pool)
	if s := d[CTKeyRunAsUser]; s != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || n < 1 || n > 1<<31-1 {
			return nil, bad(CTKeyRunAsUser, "a uid other than root's (1 to 2147483647)", nil)
		}
		p.runAsUser = n
	}
	if s := d[CTKeyTerminalPort]; s != "" {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 65535 {
			return nil, bad(CTKeyTerminalPort, "a TCP port from 1 to 65535", nil)
		}
		p.terminalPort = int32(n)
	}
	return p, nil
}

// policyJSON is vdi.Policy with durations as Go duration strings ("15m"),
// which people write; numbers (nanoseconds, as vdi.Policy marshals) are
// read too.
type policyJSON struct {
	DisconnectGrace json.RawMessage   `json:"disconnectGrace,omitempty"`
	MaxSession      json.RawMessage   `json:"maxSession,omitempty"`
	IdleTimeout     json.RawMessage   `json:"idleTimeout,omitempty"`
	Clipboard       vdi.Clipboard     `json:"clipboard,omitempty"`
	FileTransfer    *vdi.FileTransfer `json:"fileTransfer,omitempty"`
	Audio           *vdi.Toggle       `json:"audio,omitempty"`
	Record          bool              `json:"record,omitempty"`
	RecordInput     bool              `json:"recordInput,omitempty"`
	OwnRecordings   bool              `json:"ownRecordings,omitempty"`
	Watch           vdi.Watch         `json:"watch,omitempty"`
	Network         vdi.Network       `json:"network,omitempty"`
}

func parsePolicy(s string) (vdi.Policy, error) {
	var raw policyJSON
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return vdi.Policy{}, err
	}
	p := vdi.Policy{Clipboard: raw.Clipboard, Record: raw.Record, RecordInput: raw.RecordInput, OwnRecordings: raw.OwnRecordings, Watch: raw.Watch, Network: raw.Network}
	if raw.FileTransfer != nil {
		p.FileTransfer = *raw.FileTransfer
	}
	if raw.Audio != nil {
		p.Audio = *raw.Audio
	}
	if !p.Clipboard.Valid() {
		return vdi.Policy{}, fmt.Errorf("clipboard: want both, to-desktop, from-desktop or off")
	}
	if !p.Watch.Valid() {
		return vdi.Policy{}, fmt.Errorf("watch: want notify, consent or off")
	}
	if p.Network != "" && p.Network != vdi.NetworkOutbound && p.Network != vdi.NetworkNone {
		return vdi.Policy{}, fmt.Errorf("network: want outbound or none")
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *time.Duration
	}{{"disconnectGrace", raw.DisconnectGrace, &p.DisconnectGrace}, {"maxSession", raw.MaxSession, &p.MaxSession}, {"idleTimeout", raw.IdleTimeout, &p.IdleTimeout}} {
		if len(f.raw) == 0 {
			continue
		}
		var str string
		if err := json.Unmarshal(f.raw, &str); err == nil {
			d, err := time.ParseDuration(str)
			if err != nil {
				return vdi.Policy{}, fmt.Errorf("%s: %w", f.name, err)
			}
			*f.dst = d
			continue
		}
		var ns int64
		if err := json.Unmarshal(f.raw, &ns); err != nil {
			return vdi.Policy{}, fmt.Errorf("%s: want a duration such as \"15m\"", f.name)
		}
		*f.dst = time.Duration(ns)
	}
	if p.DisconnectGrace < 0 || p.MaxSession < 0 || p.IdleTimeout < 0 {
		return vdi.Policy{}, fmt.Errorf("durations cannot be negative")
	}
	return p, nil
}

// formatPolicy writes p as parsePolicy reads it, with duration strings.
func formatPolicy(p vdi.Policy) string {
	m := map[string]any{}
	for name, d := range map[string]time.Duration{"disconnectGrace": p.DisconnectGrace, "maxSession": p.MaxSession, "idleTimeout": p.IdleTimeout} {
		if d != 0 {
			m[name] = d.String()
		}
	}
	if p.Clipboard != "" {
		m["clipboard"] = p.Clipboard
	}
	if !p.FileTransfer.IsZero() {
		m["fileTransfer"] = p.FileTransfer
	}
	if p.Audio != vdi.ToggleDefault {
		m["audio"] = p.Audio.On()
	}
	if p.Watch != "" {
		m["watch"] = p.Watch
	}
	if p.Network != "" {
		m["network"] = p.Network
	}
	for name, on := range map[string]bool{"record": p.Record, "recordInput": p.RecordInput, "ownRecordings": p.OwnRecordings} {
		if on {
			m[name] = true
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}
