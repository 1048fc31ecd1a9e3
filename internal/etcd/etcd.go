// Package etcd is the narrow view of etcd's cluster and maintenance APIs that the
// operator's controllers use to manage membership directly: members join as
// learners, are promoted once caught up, and are removed from the quorum before
// their Pod is deleted.
//
// The interface exists so controllers can be unit-tested against the recording
// fake in package etcdfake, while the real implementation (New) wraps clientv3.
package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// Member is one entry of the cluster's membership list.
type Member struct {
	ID         uint64
	Name       string // empty until the member's process has started and published itself
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// Quorum is the majority of n voters: how many must agree for etcd to commit, and so how
// many must stay healthy through any change an operator makes.
func Quorum(voters int) int { return voters/2 + 1 }

// IDHex renders the ID the way etcd logs and etcdctl print it (lowercase hex,
// no padding), so it can be matched against their output and used in labels.
func (m Member) IDHex() string { return FormatID(m.ID) }

// IsStarted reports whether the member's process has joined and published its
// name; etcdctl shows the others as "unstarted".
func (m Member) IsStarted() bool { return m.Name != "" }

// FormatID renders a member ID as etcd does.
func FormatID(id uint64) string { return fmt.Sprintf("%x", id) }

// ParseID is the inverse of FormatID.
func ParseID(hex string) (uint64, error) {
	if hex == "" {
		return 0, fmt.Errorf("parse etcd member ID: empty string")
	}
	id, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("parse etcd member ID %q: %w", hex, err)
	}
	return id, nil
}

// Status is what one endpoint reports about itself.
type Status struct {
	MemberID         uint64
	ClusterID        uint64
	Leader           uint64 // 0 while the member knows no leader
	Version          string // server version, e.g. "3.6.16"
	DBSize           int64  // bytes allocated by the backend file
	DBSizeInUse      int64  // bytes actually used; DBSize-DBSizeInUse is what defragmentation frees
	DBSizeQuota      int64  // 0 on 3.5, and on 3.6.0 to 3.6.5 when etcd's default (2 GiB) applies
	RaftIndex        uint64
	RaftAppliedIndex uint64
	RaftTerm         uint64
	IsLearner        bool
	Errors           []string
	Revision         int64 // the member's own key-value revision, read without a quorum
	// StorageVersion is the format of the member's data ("3.6.0"): it follows the cluster
	// version, so an enabled downgrade migrates it to the target. "" on servers older than
	// 3.6, which do not report it.
	StorageVersion string
	// Downgrade is the cluster's downgrade as this member knows it; nil on servers older
	// than 3.6, which do not report it (etcd 3.5 keeps it all the same).
	Downgrade *DowngradeInfo
}

// DowngradeInfo is etcd's record of a downgrade: whether one is enabled, and to which minor
// (X.Y.0). etcd's leader disables it once every member runs the target minor.
type DowngradeInfo struct {
	Enabled       bool
	TargetVersion string
}

// Alarm types etcd raises.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// Alarm is an alarm raised by one member.
type Alarm struct {
	MemberID uint64
	Type     string // AlarmNoSpace or AlarmCorrupt
}

// Config says how to reach a cluster.
type Config struct {
	Endpoints []string
	TLS       *tls.Config // nil = plaintext
	Username  string      // "" = no auth
	Password  string
	// DialTimeout bounds establishing connections and authenticating; default 5s.
	DialTimeout time.Duration
	// HealthTimeout bounds one Healthy probe (and each per-endpoint Status call
	// MoveLeader and Promote make to find the leader); default 3s.
	HealthTimeout time.Duration
	// Logger receives clientv3's own logs; nil discards them, because its retry
	// warnings would otherwise flood the operator's stderr while a member is down.
	Logger *zap.Logger
}

const (
	defaultDialTimeout   = 5 * time.Second
	defaultHealthTimeout = 3 * time.Second
)

// Client is what controllers need from etcd. Implementations must be safe for
// concurrent use. Errors that callers act on are errors.Is-comparable with the
// sentinels in this package.
//
// Membership changes (AddLearner, Promote, Remove) need a context deadline:
// raft silently drops a change proposed while the previous one is still being
// applied (also right after a leader change), and etcd then waits for an apply
// that never comes. The call ends with context.DeadlineExceeded; retry it, and
// expect ErrMemberExists / ErrMemberNotFound if the first attempt did land.
type Client interface {
	// MemberList is linearizable, so a member added a moment ago is included.
	MemberList(ctx context.Context) (clusterID uint64, members []Member, err error)
	// AddLearner adds a non-voting member; its process must then be started with
	// --initial-cluster-state=existing. Fails with ErrTooManyLearners,
	// ErrUnhealthyCluster (retry), or ErrMemberExists (e.g. a retry after a
	// lost response: look the member up in MemberList).
	AddLearner(ctx context.Context, peerURLs []string) (added Member, members []Member, err error)
	// Promote makes a learner a voter. ErrLearnerNotReady means "not caught up
	// yet, retry"; ErrMemberNotLearner means it already is a voter. leader is the
	// client URL the caller last saw the leader serve, "" when it knows none: the
	// request goes to the leader, found by asking that endpoint alone while it
	// still leads, and every endpoint otherwise.
	Promote(ctx context.Context, id uint64, leader string) error
	// Remove takes a member out of the cluster. ErrMemberNotFound means it is
	// already gone, which callers may treat as success.
	Remove(ctx context.Context, id uint64) error
	// Status asks one endpoint about itself.
	Status(ctx context.Context, endpoint string) (Status, error)
	// Healthy does a quorum read through one endpoint, like
	// `etcdctl endpoint health`; bounded by Config.HealthTimeout.
	Healthy(ctx context.Context, endpoint string) error
	// MoveLeader transfers leadership to the voter `to`. It is a no-op when `to`
	// already leads.
	MoveLeader(ctx context.Context, to uint64) error
	// Defragment compacts one endpoint's backend file; it blocks that member
	// while it runs, so callers do one member at a time.
	Defragment(ctx context.Context, endpoint string) error
	// CompactToCurrent compacts the key-value history up to the current revision, which
	// frees the space old revisions hold (a defragmentation then gives it back to the file
	// system); it returns that revision.
	CompactToCurrent(ctx context.Context) (int64, error)
	// CompactKeeping compacts the history up to keep revisions before the current one, so
	// that the last keep revisions stay readable; it returns the revision compacted to, 0
	// when the history is not that long.
	CompactKeeping(ctx context.Context, keep int64) (int64, error)
	Alarms(ctx context.Context) ([]Alarm, error)
	DisarmAlarm(ctx context.Context, a Alarm) error
	Downgrade
	Auth
	Close() error
}

// Downgrade is etcd's downgrade API (etcdctl downgrade validate, enable, cancel), which etcd
// serves from 3.5 on. version names the target minor: X.Y or X.Y.Z, whose patch etcd ignores.
type Downgrade interface {
	// DowngradeValidate asks whether the cluster can be downgraded to version now, changing
	// nothing; it returns the cluster version. ErrInvalidDowngradeTarget when version is not
	// the minor just below the cluster version, ErrDowngradeInProcess when a downgrade is
	// enabled already, ErrClusterVersionUnknown while etcd has not decided its cluster
	// version yet (members just started: ask again shortly, and enable nothing meanwhile).
	DowngradeValidate(ctx context.Context, version string) (clusterVersion string, err error)
	// DowngradeEnable validates and enables a downgrade to version: the cluster version drops
	// to it at once, and members may then restart on that minor. Its errors are
	// DowngradeValidate's.
	DowngradeEnable(ctx context.Context, version string) (clusterVersion string, err error)
	// DowngradeCancel disables an enabled downgrade; the cluster version rises again once
	// every member runs the higher minor. With none enabled, etcd 3.5 answers
	// ErrNoInflightDowngrade and 3.6 and later succeed.
	DowngradeCancel(ctx context.Context) error
}

// Auth is the part of etcd's auth API the operator uses to run the single user root. Once
// authentication is enabled, every call except AuthStatus and Authenticate needs a client
// logged in as root (Config.Username and Password); without one they fail with ErrUserEmpty
// or ErrPermissionDenied. Passwords never appear in returned errors.
type Auth interface {
	// AuthStatus reports whether authentication is enabled.
	AuthStatus(ctx context.Context) (enabled bool, err error)
	// Authenticate checks a user's password without changing the client's own login:
	// ErrAuthFailed for a wrong password or an unknown user, ErrAuthNotEnabled while
	// authentication is off (etcd checks nothing then).
	Authenticate(ctx context.Context, user, password string) error
	// UserAdd creates a user; ErrUserExists if it exists already.
	UserAdd(ctx context.Context, user, password string) error
	// UserGrantRole grants a role; granting one the user has is a no-op.
	UserGrantRole(ctx context.Context, user, role string) error
	// UserChangePassword sets a user's password; ErrUserNotFound for an unknown user.
	UserChangePassword(ctx context.Context, user, password string) error
	// UserList names every user; RoleList every role etcd stores (the built-in root role
	// may be absent). Both need root once authentication is on.
	UserList(ctx context.Context) ([]string, error)
	RoleList(ctx context.Context) ([]string, error)
	// AuthEnable turns authentication on; a no-op when it is on. It needs user root with
	// the root role: ErrRootUserNotExist or ErrRootRoleNotExist otherwise.
	AuthEnable(ctx context.Context) error
}

// RootUser and RootRole are etcd's built-in superuser and its role.
const (
	RootUser = "root"
	RootRole = "root"
)
