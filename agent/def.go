package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// tool is one of the seat's tools: served over MCP, and as JSON at
// /api/vdi/desktops/{ns}/{member}/agent/{name} when it acts on a desktop
// (its input names one).
type tool struct {
	name string
	// add adds the tool, acting as id, to an MCP server.
	add func(s *Seat, srv *mcp.Server, id vdi.Identity)
	// act runs the tool as id on ref with the JSON arguments body (the
	// desktop taken from ref, never from body); nil for a tool that acts
	// on no desktop.
	act func(s *Seat, ctx context.Context, id vdi.Identity, ref vdi.Ref, body []byte) (*mcp.CallToolResult, any, error)
}

// onDesktop is an input that names a desktop.
type onDesktop interface{ at(ref vdi.Ref) }

func (w *Where) at(ref vdi.Ref) { w.Desktop = ref.String() }

// def defines a tool by the token scope it needs (vdi.ScopeSee, ...), its
// MCP description and what it does as id. A token without the scope is
// refused before run, over MCP and JSON alike, with the scope named.
func def[In, Out any](scope string, t *mcp.Tool, do func(s *Seat, ctx context.Context, id vdi.Identity, in In) (*mcp.CallToolResult, Out, error)) tool {
	t.Description += " Needs the token's " + scope + " scope."
	run := func(s *Seat, ctx context.Context, id vdi.Identity, in In) (*mcp.CallToolResult, Out, error) {
		if err := id.May(scope); err != nil {
			var none Out
			return nil, none, err
		}
		return do(s, ctx, id, in)
	}
	tl := tool{name: t.Name, add: func(s *Seat, srv *mcp.Server, id vdi.Identity) {
		tt := *t // AddTool fills in the schemas: one copy per server
		mcp.AddTool(srv, &tt, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
			return run(s, ctx, id, in)
		})
	}}
	var probe In
	if _, ok := any(&probe).(onDesktop); !ok {
		return tl
	}
	tl.act = func(s *Seat, ctx context.Context, id vdi.Identity, ref vdi.Ref, body []byte) (*mcp.CallToolResult, any, error) {
		var in In
		if len(body) > 0 {
			if err := json.Unmarshal(body, &in); err != nil {
				return nil, nil, vdi.Errorf(vdi.EInvalid, "Send the tool's arguments as a JSON object, as its MCP input schema describes (tools/list).",
					"The arguments of %s are not valid JSON: %v.", t.Name, err)
			}
		}
		any(&in).(onDesktop).at(ref)
		return run(s, ctx, id, in)
	}
	return tl
}

// tools are every tool of the seat.
var tools = slices.Concat(sessionTools, inputTools)

// desktopTools names the tools that act on a desktop (the JSON routes').
var desktopTools = func() []string {
	var names []string
	for _, t := range tools {
		if t.act != nil {
			names = append(names, t.name)
		}
	}
	return names
}()

// addTools adds the seat's tools, acting as id, to srv.
func (s *Seat) addTools(srv *mcp.Server, id vdi.Identity) {
	for _, t := range tools {
		t.add(s, srv, id)
	}
}

// Reply is a tool's answer to a JSON call: a screenshot's PNG with the
// screen it was taken of, or a value to send as JSON (the tool's
// structured answer, or {"result": its text}).
type Reply struct {
	PNG    []byte
	Screen Screen
	Value  any
}

// Act runs the tool name as id on the desktop ref with the JSON arguments
// body: the seat's JSON routes, for scripts without an MCP client. Every
// rule of an MCP call holds (the token's pools, the holder, the rate
// limits, the audit). A tool that is not there, or acts on no desktop
// (list_pools and claim_desktop have routes of their own), is ENotFound.
func (s *Seat) Act(ctx context.Context, id vdi.Identity, ref vdi.Ref, name string, body []byte) (Reply, error) {
	i := slices.IndexFunc(tools, func(t tool) bool { return t.name == name && t.act != nil })
	if i < 0 {
		return Reply{}, vdi.Errorf(vdi.ENotFound, "The tools are those of /mcp that act on a desktop: "+strings.Join(desktopTools, ", ")+".",
			"No agent action %q on a desktop.", name)
	}
	res, out, err := tools[i].act(s, ctx, id, ref, body)
	if err != nil {
		return Reply{}, err
	}
	var r Reply
	var text strings.Builder
	if res != nil {
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.ImageContent:
				r.PNG = c.Data
			case *mcp.TextContent:
				text.WriteString(c.Text)
			}
		}
	}
	switch out := out.(type) {
	case Screen:
		r.Screen = out
	case nil:
		r.Value = map[string]string{"result": text.String()}
	default:
		r.Value = out
	}
	return r, nil
}
