package testoidc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is the OP's in-memory state: one client, a few users, pending
// authorization requests, issued codes and access tokens, and the
// signed-in browser sessions of the login page.
type storage struct {
	mu       sync.Mutex
	client   *client
	users    map[string]User // by ID
	requests map[string]*authRequest
	codes    map[string]string // code -> request ID
	tokens   map[string]token
	sessions map[string]string // login page session cookie -> user ID
	ended    []string          // user IDs whose sessions were ended (RP-initiated logout)
	key      signingKey
	groups   string
	seq      int
}

var (
	_ op.Storage                   = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest = (*storage)(nil)
)

type token struct {
	subject, clientID string
	scopes            []string
	expires           time.Time
}

func newStorage(c *client, users []User, groupsClaim string) (*storage, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	s := &storage{
		client: c, users: map[string]User{}, requests: map[string]*authRequest{},
		codes: map[string]string{}, tokens: map[string]token{}, sessions: map[string]string{},
		key: signingKey{id: "test-key-1", key: key}, groups: groupsClaim,
	}
	for _, u := range users {
		s.users[u.ID] = u
	}
	return s, nil
}

func (s *storage) nextID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s-%d-%s", prefix, s.seq, randomString())
}

// checkPassword completes authorization request id for the user with this
// name and password.
func (s *storage) checkPassword(id, username, password string) (userID string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.requests[id]
	if !ok {
		return "", errors.New("unknown or finished sign-in request")
	}
	for _, u := range s.users {
		if u.Username == username && u.Password == password {
			req.userID, req.done, req.authTime = u.ID, true, time.Now()
			return u.ID, nil
		}
	}
	return "", errors.New("wrong user name or password")
}

// completeWithSession completes request id for the user of a login page
// session, and reports whether that session exists.
func (s *storage) completeWithSession(id, session string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, ok := s.sessions[session]
	req, found := s.requests[id]
	if !ok || !found {
		return false
	}
	req.userID, req.done, req.authTime = uid, true, time.Now()
	return true
}

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := &authRequest{
		id: s.nextID("req"), clientID: r.ClientID, redirectURI: r.RedirectURI, state: r.State,
		nonce: r.Nonce, scopes: r.Scopes, responseType: r.ResponseType, responseMode: r.ResponseMode,
		userID: userID, created: time.Now(),
	}
	if r.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	s.requests[req.id] = req
	return req, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req, ok := s.requests[id]; ok {
		return req, nil
	}
	return nil, errors.New("auth request not found")
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("code invalid, expired or already used")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest runs once the code was exchanged: the code is gone, so
// a replayed code is refused.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID("at")
	t := token{subject: r.GetSubject(), scopes: r.GetScopes(), expires: time.Now().Add(5 * time.Minute)}
	if ar, ok := r.(*authRequest); ok {
		t.clientID = ar.clientID
	}
	s.tokens[id] = t
	return id, t.expires, nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("refresh tokens are not offered by the test provider")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

// TerminateSession ends the user's login page sessions and tokens: after
// it, the provider asks for the password again.
func (s *storage) TerminateSession(_ context.Context, userID, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = append(s.ended, userID)
	for sid, uid := range s.sessions {
		if uid == userID {
			delete(s.sessions, sid)
		}
	}
	for id, t := range s.tokens {
		if t.subject == userID && t.clientID == clientID {
			delete(s.tokens, id)
		}
	}
	return nil
}

func (s *storage) RevokeToken(_ context.Context, tokenID, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, tokenID)
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return &s.key, nil }

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{s.key}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != s.client.id {
		return nil, fmt.Errorf("client %q not found", id)
	}
	return s.client, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.client.id || secret != s.client.secret {
		return errors.New("wrong client id or secret")
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, r op.IDTokenRequest, scopes []string) error {
	return s.userinfo(info, r.GetSubject(), scopes)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	s.mu.Lock()
	t, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok || time.Now().After(t.expires) {
		return errors.New("access token invalid or expired")
	}
	return s.userinfo(info, t.subject, t.scopes)
}

func (s *storage) userinfo(info *oidc.UserInfo, userID string, scopes []string) error {
	s.mu.Lock()
	u, ok := s.users[userID]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("user %q not found", userID)
	}
	for _, sc := range scopes {
		switch sc {
		case oidc.ScopeOpenID:
			info.Subject = u.ID
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = u.Email, oidc.Bool(!u.EmailUnverified)
		case oidc.ScopeProfile:
			info.Name, info.PreferredUsername = u.Name, u.Username
		}
	}
	if len(u.Groups) > 0 {
		info.AppendClaims(s.groups, u.Groups)
	}
	return nil
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("introspection is not offered by the test provider")
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile is not offered by the test provider")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("JWT profile is not offered by the test provider")
}

func (s *storage) Health(context.Context) error { return nil }

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }

type publicKey struct{ signingKey }

func (k publicKey) ID() string                         { return k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.key.PublicKey }
