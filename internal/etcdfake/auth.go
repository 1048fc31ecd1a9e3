package etcdfake

import (
	"context"
	"fmt"
	"slices"

	"github.com/quorumkeeper/etcd-operator/internal/etcd"
)

// The auth model: users with a password and roles (only etcd's built-in root role exists),
// and a switch. Calls on the Cluster itself are those of a client without credentials; Login
// returns a client logged in as a user. As in etcd, once authentication is on the user API
// needs root, and only the auth API checks credentials (the fake does not model key
// permissions). Passwords are never recorded in Calls.

type user struct {
	password string
	roles    []string
}

// Login is what etcd.New does with Config.Username and Password: while authentication is on,
// a wrong password or unknown user fails with etcd.ErrAuthFailed; while it is off, the
// credentials are ignored. The returned client shares this Cluster's state and call record.
func (f *Cluster) Login(name, password string) (etcd.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "Login("+name+")")
	if !f.authEnabled {
		return &Session{Cluster: f}, nil
	}
	if u := f.users[name]; u == nil || u.password != password {
		return nil, fmt.Errorf("etcdfake: login %s: %w", name, etcd.ErrAuthFailed)
	}
	return &Session{Cluster: f, user: name}, nil
}

// Session is a client logged in as a user; see Login.
type Session struct {
	*Cluster
	user string
}

// Close of a session leaves the shared Cluster usable, as closing one of several clients does.
func (s *Session) Close() error { return nil }

func (s *Session) UserAdd(ctx context.Context, name, password string) error {
	return s.userAdd(ctx, s.user, name, password)
}

func (s *Session) UserGrantRole(ctx context.Context, name, role string) error {
	return s.userGrantRole(ctx, s.user, name, role)
}

func (s *Session) UserChangePassword(ctx context.Context, name, password string) error {
	return s.userChangePassword(ctx, s.user, name, password)
}

func (s *Session) UserList(ctx context.Context) ([]string, error) { return s.userList(ctx, s.user) }

func (s *Session) RoleList(ctx context.Context) ([]string, error) { return s.roleList(ctx, s.user) }

func (f *Cluster) UserList(ctx context.Context) ([]string, error) { return f.userList(ctx, "") }

func (f *Cluster) RoleList(ctx context.Context) ([]string, error) { return f.roleList(ctx, "") }

// SeedUser and SeedRole make a user (with roles) or a role as someone other than the
// operator would, without recording a call.
func (f *Cluster) SeedUser(name, password string, roles ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[name] = &user{password: password, roles: roles}
}

func (f *Cluster) SeedRole(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.roles = append(f.roles, name)
}

func (f *Cluster) userList(ctx context.Context, as string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "UserList", "")
	if err := firstError(early, f.withQuorum(), f.asAdmin(as)); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(f.users))
	for name := range f.users {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, lost
}

func (f *Cluster) roleList(ctx context.Context, as string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "RoleList", "")
	if err := firstError(early, f.withQuorum(), f.asAdmin(as)); err != nil {
		return nil, err
	}
	return slices.Clone(f.roles), lost
}

// AuthEnabled reports the switch without recording a call.
func (f *Cluster) AuthEnabled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.authEnabled
}

// Password returns a user's password ("" for none) without recording a call, for tests that
// check what etcd ended up with.
func (f *Cluster) Password(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u := f.users[name]; u != nil {
		return u.password
	}
	return ""
}

// SetPassword changes a user's password behind the operator's back, as someone with etcdctl
// would. Not recorded in Calls.
func (f *Cluster) SetPassword(name, password string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if u := f.users[name]; u != nil {
		u.password = password
		return
	}
	panic(fmt.Sprintf("etcdfake: no user %q", name))
}

func (f *Cluster) AuthStatus(ctx context.Context) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "AuthStatus", "")
	if err := firstError(early, f.withQuorum(), lost); err != nil {
		return false, err
	}
	return f.authEnabled, nil
}

func (f *Cluster) Authenticate(ctx context.Context, name, password string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "Authenticate", name)
	if err := firstError(early, f.withQuorum()); err != nil {
		return err
	}
	if !f.authEnabled {
		return fmt.Errorf("etcdfake: authenticate %s: %w", name, etcd.ErrAuthNotEnabled)
	}
	if u := f.users[name]; u == nil || u.password != password {
		return fmt.Errorf("etcdfake: authenticate %s: %w", name, etcd.ErrAuthFailed)
	}
	return lost
}

func (f *Cluster) UserAdd(ctx context.Context, name, password string) error {
	return f.userAdd(ctx, "", name, password)
}

func (f *Cluster) UserGrantRole(ctx context.Context, name, role string) error {
	return f.userGrantRole(ctx, "", name, role)
}

func (f *Cluster) UserChangePassword(ctx context.Context, name, password string) error {
	return f.userChangePassword(ctx, "", name, password)
}

// asAdmin is etcd's permission check for the user API: anyone while authentication is off,
// root afterwards.
func (f *Cluster) asAdmin(as string) error {
	switch {
	case !f.authEnabled:
		return nil
	case as == "":
		return fmt.Errorf("etcdfake: %w", etcd.ErrUserEmpty)
	case f.users[as] == nil || !slices.Contains(f.users[as].roles, etcd.RootRole):
		return fmt.Errorf("etcdfake: %s: %w", as, etcd.ErrPermissionDenied)
	}
	return nil
}

func (f *Cluster) userAdd(ctx context.Context, as, name, password string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "UserAdd", name)
	if err := firstError(early, f.withQuorum(), f.asAdmin(as)); err != nil {
		return err
	}
	if f.users[name] != nil {
		return fmt.Errorf("etcdfake: add user %s: %w", name, etcd.ErrUserExists)
	}
	f.users[name] = &user{password: password}
	return lost
}

func (f *Cluster) userGrantRole(ctx context.Context, as, name, role string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "UserGrantRole", name+","+role)
	if err := firstError(early, f.withQuorum(), f.asAdmin(as)); err != nil {
		return err
	}
	u := f.users[name]
	switch {
	case u == nil:
		return fmt.Errorf("etcdfake: grant %s to %s: %w", role, name, etcd.ErrUserNotFound)
	case role != etcd.RootRole:
		return fmt.Errorf("etcdfake: grant %s to %s: %w", role, name, etcd.ErrRoleNotFound)
	}
	if !slices.Contains(u.roles, role) {
		u.roles = append(u.roles, role)
	}
	return lost
}

func (f *Cluster) userChangePassword(ctx context.Context, as, name, password string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "UserChangePassword", name)
	if err := firstError(early, f.withQuorum(), f.asAdmin(as)); err != nil {
		return err
	}
	u := f.users[name]
	if u == nil {
		return fmt.Errorf("etcdfake: change password of %s: %w", name, etcd.ErrUserNotFound)
	}
	u.password = password
	return lost
}

// AuthEnable needs no login: authentication is off until it succeeds, and a second enable
// is ignored.
func (f *Cluster) AuthEnable(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	early, lost := f.begin(ctx, "AuthEnable", "")
	if err := firstError(early, f.withQuorum()); err != nil {
		return err
	}
	if f.authEnabled {
		return lost
	}
	root := f.users[etcd.RootUser]
	switch {
	case root == nil:
		return fmt.Errorf("etcdfake: enable auth: %w", etcd.ErrRootUserNotExist)
	case !slices.Contains(root.roles, etcd.RootRole):
		return fmt.Errorf("etcdfake: enable auth: %w", etcd.ErrRootRoleNotExist)
	}
	f.authEnabled = true
	return lost
}
