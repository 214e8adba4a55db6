package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"syscall"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// client returns a client of the portal's admin socket.
func (f *Flags) client() (*adminClient, error) {
	path, where, err := socketPath(f.socket, f.env.Getenv)
	if err != nil {
		return nil, err
	}
	return &adminClient{socket: path, where: where, http: &http.Client{
		Timeout: 5 * time.Minute, // recreating a desktop can take a while
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}}, nil
}

// socketPath finds the admin socket: -socket, CORRAL_VDI_ADMIN_SOCKET, or
// admin.sock in the data directory serve uses. where says which, for
// messages.
func socketPath(flagValue string, getenv func(string) string) (path, where string, err error) {
	if flagValue != "" {
		return flagValue, "given by -socket", nil
	}
	switch v := getenv("CORRAL_VDI_ADMIN_SOCKET"); v {
	case "off":
		return "", "", errors.New("CORRAL_VDI_ADMIN_SOCKET is off, so the portal serves no admin socket: unset it where the portal runs and restart it, or pass -socket")
	case "":
	default:
		return v, "from CORRAL_VDI_ADMIN_SOCKET", nil
	}
	dir := getenv("CORRAL_VDI_DATA_DIR")
	if dir == "" {
		dir = api.DefaultDataDir(getenv)
	}
	return filepath.Join(dir, api.AdminSocketName), "in the data directory " + dir + " (CORRAL_VDI_DATA_DIR)", nil
}

// adminClient calls the portal's JSON API over its admin socket.
type adminClient struct {
	socket string
	where  string // how the socket was found
	http   *http.Client
	// portalURL is the portal's web address, as its answers say.
	portalURL string
}

// do sends method path with body as JSON (unless nil) and returns the
// answer's JSON.
func (c *adminClient) do(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		buf, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://portal"+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.dialError(err)
	}
	defer res.Body.Close()
	if u := res.Header.Get(api.PortalURLHeader); u != "" {
		c.portalURL = u
	}
	answer, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the portal's answer: %w", err)
	}
	if res.StatusCode/100 != 2 {
		e := &api.Error{Status: res.StatusCode}
		if json.Unmarshal(answer, e) != nil || e.Msg == "" {
			return nil, fmt.Errorf("the portal answered %s to %s %s; see its log", res.Status, method, path)
		}
		return nil, e
	}
	return answer, nil
}

// get fetches path into out.
func (c *adminClient) get(ctx context.Context, path string, out any) (json.RawMessage, error) {
	raw, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if err := jsonInto(raw, out); err != nil {
		return nil, err
	}
	return raw, nil
}

// jsonInto decodes an answer of the portal into out.
func jsonInto(raw json.RawMessage, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("the portal's answer is not what this command expects (%v): are the portal and this command the same version?", err)
	}
	return nil
}

// dialError explains a failure to reach the portal.
func (c *adminClient) dialError(err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return &exitError{ExitNoPortal, fmt.Errorf("the portal is not running: nothing answers on %s, looked for %s.\n"+
			"  Start it with `make run` or `corral-vdi-portal serve`, or point -socket (CORRAL_VDI_ADMIN_SOCKET) at the admin socket of the portal you mean", c.socket, c.where)}
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return refusef("permission denied on the admin socket %s: only root and the portal's user may use it; run the command as one of them", c.socket)
	}
	return fmt.Errorf("talking to the portal on %s: %w", c.socket, err)
}
