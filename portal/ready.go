package portal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// errNotReady is what /readyz reports while the portal lacks something it
// cannot serve without; the log says what once, at start.
var errNotReady = errors.New("not ready")

// replicaName is what the history page calls this replica when its
// history is its own: the election identity of a kube replica keeping
// SQLite in its data dir; empty for one portal, or for replicas that share
// PostgreSQL.
func replicaName(c Config, identity string) string {
	if c.Store.DatabaseURL != "" {
		return ""
	}
	return identity
}

// checkSharedSecrets makes the portal not ready, with one log line naming
// the Secret, its missing keys and the command that adds them, when
// Config.SharedSecretsFrom is set and any key the replicas share is empty:
// a replica that serves with a key of its own breaks consoles and sign-ins
// that cross replicas. Without metrics-token it closes /metrics
// (metricsClosed) with that command as the hint.
func (m *Main) checkSharedSecrets() {
	from := m.Config.Kube.SharedSecretsFrom
	if from == "" {
		return
	}
	missing, exists := m.Config.missingSharedSecrets()
	if len(missing) == 0 {
		return
	}
	ns, name, ok := strings.Cut(from, "/")
	if !ok {
		ns, name = m.Config.Kube.Namespace, from
	}
	var keys, envs []string
	ready := true
	for _, s := range missing {
		keys, envs = append(keys, s.key), append(envs, s.env)
		ready = ready && !s.ready
	}
	fix := secretFix(ns, name, missing, exists)
	if m.Config.Server.MetricsToken == "" {
		m.metricsClosed = fmt.Sprintf("The portal's Secret %s/%s has no metrics-token. Add it: %s. Then send it as Authorization: Bearer <token>.", ns, name, fix)
	}
	attrs := []any{"secret", ns + "/" + name, "keys", strings.Join(keys, ","), "env", strings.Join(envs, ","), "fix", fix}
	if ready {
		m.Log.Warn("metrics token missing: /metrics answers 503 to everyone until the Secret has it and the pods restart; the portal serves", attrs...)
		return
	}
	m.notReady = fmt.Errorf("%w: Secret %s/%s lacks %s", errNotReady, ns, name, strings.Join(keys, ", "))
	m.Log.Error("shared secrets missing: not ready until the Secret has them and the pods restart", attrs...)
}

// secretFix is the command that adds the missing keys to Secret ns/name
// (patching it when it exists, else creating it) and restarts the
// portal's pods, which read the keys at start.
func secretFix(ns, name string, missing []sharedSecret, exists bool) string {
	value := func(s sharedSecret) string {
		if s.key == "oidc-client-secret" {
			return "<the client secret from your OpenID provider>"
		}
		return "$(openssl rand -base64 32)"
	}
	restart := fmt.Sprintf(" && kubectl -n %s rollout restart deployment/corral-vdi-portal", ns)
	if exists {
		var fields []string
		for _, s := range missing {
			fields = append(fields, fmt.Sprintf(`\"%s\":\"%s\"`, s.key, value(s)))
		}
		return fmt.Sprintf(`kubectl -n %s patch secret %s -p "{\"stringData\":{%s}}"`, ns, name, strings.Join(fields, ",")) + restart
	}
	var literals []string
	for _, s := range missing {
		literals = append(literals, fmt.Sprintf("--from-literal=%s=%q", s.key, value(s)))
	}
	return fmt.Sprintf("kubectl -n %s create secret generic %s %s", ns, name, strings.Join(literals, " ")) + restart
}

// apiserverCheckEvery is how long an answer of the API server's /readyz
// stands: probes and page loads in between reuse it.
const apiserverCheckEvery = 2 * time.Second

// apiserverCheckWait bounds one check.
const apiserverCheckWait = 3 * time.Second

// apiserverOutageReady is how long the API server may be away before
// /readyz fails. A blip takes every replica's API server away at once:
// failing readiness at once would empty the Service, and users would get
// the ingress's bare 503 instead of pages that explain it (open consoles
// go on meanwhile). Past this, the replica is out of the Service, so a
// replica that alone lost the API server stops taking users.
const apiserverOutageReady = time.Minute

// errDraining is /readyz's answer once SIGTERM has come.
var errDraining = fmt.Errorf("%w: draining: shutting down, open consoles finish, new ones go to other replicas", errNotReady)

// apiserverHealth remembers the last answer of the kube API server's
// /readyz (the default RBAC lets every identity read it). Its zero value
// (or a nil Clientset: the local backend) is healthy.
type apiserverHealth struct {
	cs kubernetes.Interface

	mu       sync.Mutex
	at       time.Time // of the last answer
	err      error
	since    time.Time     // when it stopped answering; zero while it answers
	checking chan struct{} // closed when the check under way ends; nil when none is
}

// check returns why the API server is not ready, asking it again (once,
// however many callers ask at the same time) when the last answer is older
// than apiserverCheckEvery.
func (h *apiserverHealth) check(ctx context.Context) error {
	if h.cs == nil {
		return nil
	}
	h.mu.Lock()
	if time.Since(h.at) < apiserverCheckEvery {
		defer h.mu.Unlock()
		return h.err
	}
	wait := h.start()
	h.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// start begins a check unless one is under way, and returns the channel
// closed when it ends. h.mu is held.
func (h *apiserverHealth) start() chan struct{} {
	if h.checking != nil {
		return h.checking
	}
	done := make(chan struct{})
	h.checking = done
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), apiserverCheckWait)
		defer cancel()
		err := h.cs.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		h.mu.Lock()
		h.at, h.checking = time.Now(), nil
		switch {
		case err == nil:
			h.err, h.since = nil, time.Time{}
		case h.since.IsZero():
			h.since = h.at
			fallthrough
		default:
			h.err = fmt.Errorf("%w: the Kubernetes API server does not answer (since %s UTC): %v", errNotReady, h.since.UTC().Format(time.TimeOnly), err)
		}
		h.mu.Unlock()
		close(done)
	}()
	return done
}

// ready is check for /readyz: an API server away for less than
// apiserverOutageReady (measured by now) still lets the replica serve;
// the detail is the notice /readyz and the pages show.
func (h *apiserverHealth) ready(ctx context.Context, now time.Time) error {
	err := h.check(ctx)
	if err == nil {
		return nil
	}
	h.mu.Lock()
	since := h.since
	h.mu.Unlock()
	if !since.IsZero() && now.Sub(since) < apiserverOutageReady {
		return nil
	}
	return err
}

// watch asks the API server every apiserverCheckEvery until ctx ends, so
// that pages know it is down without waiting for it.
func (h *apiserverHealth) watch(ctx context.Context) {
	t := time.NewTicker(apiserverCheckEvery)
	defer t.Stop()
	for {
		h.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// notice is what the pages say while the API server does not answer, from
// the last answer (watch keeps it fresh); empty while it answers.
func (h *apiserverHealth) notice() string {
	if h.cs == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		return ""
	}
	return "The Kubernetes API server does not answer (since " + h.since.UTC().Format(time.TimeOnly) + " UTC): claims and new consoles wait until it is back; open consoles keep running."
}
