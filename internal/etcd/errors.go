package etcd

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Sentinels for the etcd errors controllers branch on. Errors returned by
// Client match them with errors.Is and keep etcd's own message.
var (
	// ErrLearnerNotReady: the learner has not caught up with the leader; retry later.
	ErrLearnerNotReady = errors.New("learner not yet in sync with leader")
	// ErrMemberNotFound: no member with that ID (or it was removed already).
	ErrMemberNotFound = errors.New("member not found")
	// ErrTooManyLearners: the cluster already has --max-learners learners.
	ErrTooManyLearners = errors.New("too many learners")
	// ErrMemberNotLearner: Promote of a member that already votes.
	ErrMemberNotLearner = errors.New("member is not a learner")
	// ErrMemberExists: AddLearner with peer URLs some member already has. etcd
	// reports this as "Peer URLs already exists" or, when the new member's ID
	// (a hash of its peer URLs) collides, "member ID already exist"; both mean
	// the member is there already, typically from an earlier attempt.
	ErrMemberExists = errors.New("member with these peer URLs already exists")
	// ErrNotEnoughStartedMembers: the change would leave fewer started voters
	// than a quorum (strict reconfig check); retry once members have started.
	ErrNotEnoughStartedMembers = errors.New("not enough started members")
	// ErrUnhealthyCluster: the leader has not been connected to enough peers for
	// long enough (etcd wants 5s) to add or remove a member safely; it is
	// common right after a cluster starts or a member restarts. Retry later.
	ErrUnhealthyCluster = errors.New("cluster unhealthy for reconfiguration")
	// ErrBadLeaderTransferee: MoveLeader to an unknown member or a learner.
	ErrBadLeaderTransferee = errors.New("bad leader transferee")
	// ErrNotLeader: a leader-only request reached a follower, e.g. because
	// leadership changed meanwhile; retry.
	ErrNotLeader = errors.New("not leader")

	// ErrAuthFailed: wrong password or unknown user (etcd does not say which).
	ErrAuthFailed = errors.New("authentication failed")
	// ErrAuthNotEnabled: Authenticate while authentication is off.
	ErrAuthNotEnabled = errors.New("authentication is not enabled")
	// ErrUserEmpty: a request without credentials while authentication is on.
	ErrUserEmpty = errors.New("user name is empty")
	// ErrPermissionDenied: the logged-in user may not do this.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrUserExists: UserAdd of a user that exists.
	ErrUserExists = errors.New("user already exists")
	// ErrUserNotFound: a user operation on an unknown user.
	ErrUserNotFound = errors.New("user not found")
	// ErrRoleNotFound: a grant of an unknown role.
	ErrRoleNotFound = errors.New("role not found")
	// ErrRootUserNotExist and ErrRootRoleNotExist: AuthEnable before user root exists with
	// the root role.
	ErrRootUserNotExist = errors.New("root user does not exist")
	ErrRootRoleNotExist = errors.New("root user does not have root role")
	// ErrInvalidAuthToken: the client's token expired or was revoked (a password change
	// revokes every token of the user); a new client logs in again.
	ErrInvalidAuthToken = errors.New("invalid auth token")

	// ErrInvalidDowngradeTarget: a downgrade to anything but the minor just below the cluster
	// version.
	ErrInvalidDowngradeTarget = errors.New("invalid downgrade target version")
	// ErrDowngradeInProcess: a downgrade is enabled already.
	ErrDowngradeInProcess = errors.New("a downgrade is in progress")
	// ErrNoInflightDowngrade: DowngradeCancel while no downgrade is enabled.
	ErrNoInflightDowngrade = errors.New("no downgrade in progress")
	// ErrClusterVersionUnknown: etcd has not decided its cluster version yet ("cluster version
	// not found during downgrade"). A cluster whose members just started has none for a
	// moment: its leader decides it once the members have published themselves. Nothing that
	// acts on the cluster version may go on meanwhile (an enable sent then once made a 3.6.16
	// member exit); retry shortly.
	ErrClusterVersionUnknown = errors.New("cluster version not decided yet")
)

// etcdErrorSentinels pairs etcd's gRPC errors with our sentinels. Matching is by
// message because that is how clientv3 itself identifies server errors.
var etcdErrorSentinels = []struct {
	etcd     error
	sentinel error
}{
	{rpctypes.ErrGRPCLearnerNotReady, ErrLearnerNotReady},
	{rpctypes.ErrGRPCMemberNotFound, ErrMemberNotFound},
	{rpctypes.ErrGRPCTooManyLearners, ErrTooManyLearners},
	{rpctypes.ErrGRPCMemberNotLearner, ErrMemberNotLearner},
	{rpctypes.ErrGRPCPeerURLExist, ErrMemberExists},
	{rpctypes.ErrGRPCMemberExist, ErrMemberExists},
	{rpctypes.ErrGRPCMemberNotEnoughStarted, ErrNotEnoughStartedMembers},
	{rpctypes.ErrGRPCUnhealthy, ErrUnhealthyCluster},
	{rpctypes.ErrGRPCBadLeaderTransferee, ErrBadLeaderTransferee},
	{rpctypes.ErrGRPCNotLeader, ErrNotLeader},
	{rpctypes.ErrGRPCAuthFailed, ErrAuthFailed},
	{rpctypes.ErrGRPCAuthNotEnabled, ErrAuthNotEnabled},
	{rpctypes.ErrGRPCUserEmpty, ErrUserEmpty},
	{rpctypes.ErrGRPCPermissionDenied, ErrPermissionDenied},
	{rpctypes.ErrGRPCUserAlreadyExist, ErrUserExists},
	{rpctypes.ErrGRPCUserNotFound, ErrUserNotFound},
	{rpctypes.ErrGRPCRoleNotFound, ErrRoleNotFound},
	{rpctypes.ErrGRPCRootUserNotExist, ErrRootUserNotExist},
	{rpctypes.ErrGRPCRootRoleNotExist, ErrRootRoleNotExist},
	{rpctypes.ErrGRPCInvalidAuthToken, ErrInvalidAuthToken},
	{rpctypes.ErrGRPCInvalidDowngradeTargetVersion, ErrInvalidDowngradeTarget},
	{rpctypes.ErrGRPCDowngradeInProcess, ErrDowngradeInProcess},
	{rpctypes.ErrGRPCNoInflightDowngrade, ErrNoInflightDowngrade},
	{rpctypes.ErrGRPCClusterVersionUnavailable, ErrClusterVersionUnknown},
}

// etcdError keeps etcd's error (and its message) while also matching a sentinel.
type etcdError struct {
	sentinel error
	cause    error
}

func (e *etcdError) Error() string   { return e.cause.Error() }
func (e *etcdError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// translateError attaches the matching sentinel to err, if there is one.
func translateError(err error) error {
	if err == nil {
		return nil
	}
	desc := rpctypes.ErrorDesc(err)
	var server rpctypes.EtcdError
	if errors.As(err, &server) {
		desc = server.Error()
	}
	for _, pair := range etcdErrorSentinels {
		if desc == rpctypes.ErrorDesc(pair.etcd) {
			return &etcdError{sentinel: pair.sentinel, cause: err}
		}
	}
	return err
}
