package agent

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The seat's resources: the state of the desktops the token's user holds
// (within the token's pools), as the API's GET /api/vdi/desktops answers
// it — power, pool, protocols, the clipboard and watch policy, the next
// reclaim, the agent's name.
const (
	desktopsURI     = "corral://desktops"
	desktopTemplate = "corral://desktops/{namespace}/{member}"
)

// addResources adds the seat's resources, read as id, to srv.
func (s *Seat) addResources(srv *mcp.Server, id vdi.Identity) {
	srv.AddResource(&mcp.Resource{URI: desktopsURI, Name: "desktops", MIMEType: "application/json",
		Description: "The desktops this token's user holds in the token's pools, with their state and the next reclaim."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			if err := id.May(vdi.ScopeSee); err != nil {
				return nil, err
			}
			ds, err := s.cfg.Desktops.Desktops(ctx, id, false)
			if err != nil {
				return nil, err
			}
			if ds == nil {
				ds = []vdi.Desktop{}
			}
			return jsonResource(req.Params.URI, ds)
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: desktopTemplate, Name: "desktop", MIMEType: "application/json",
		Description: "One desktop's state: power, pool, protocols, policy, the next reclaim; only a desktop this token's user holds."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			if err := id.May(vdi.ScopeSee); err != nil {
				return nil, err
			}
			ref, err := parseRef(strings.TrimPrefix(req.Params.URI, "corral://desktops/"))
			if err != nil {
				return nil, mcp.ResourceNotFoundError(req.Params.URI)
			}
			d, err := s.cfg.Desktops.Desktop(ctx, id, ref)
			if err != nil || d.Holder != id.Login {
				// Another's desktop reads as missing, as a person's would.
				return nil, mcp.ResourceNotFoundError(req.Params.URI)
			}
			return jsonResource(req.Params.URI, d)
		})
}

// jsonResource is a resource's contents: v as JSON.
func jsonResource(uri string, v any) (*mcp.ReadResourceResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}
