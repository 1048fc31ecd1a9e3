package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// client implements Client over clientv3.
type client struct {
	cli           *clientv3.Client
	healthTimeout time.Duration
	// login follows the logins with the configured credentials; nil without them.
	login *loginWatch
}

// New builds a Client. Connections are made lazily, so New succeeds while the
// cluster is unreachable (unless credentials must be exchanged for a token);
// the first call reports the problem instead.
func New(cfg Config) (Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd client: no endpoints")
	}
	ccfg := clientConfig(cfg)
	var login *loginWatch
	if cfg.Username != "" && cfg.Password != "" {
		login = &loginWatch{user: cfg.Username, password: cfg.Password}
		ccfg.DialOptions = append(ccfg.DialOptions, grpc.WithChainUnaryInterceptor(login.intercept))
	}
	cli, err := clientv3.New(ccfg)
	if err != nil {
		// translateError lets callers tell a rejected password (ErrAuthFailed) from an
		// unreachable cluster; clientv3 logs in here when credentials are given.
		return nil, fmt.Errorf("etcd client for %v: %w", cfg.Endpoints, translateError(err))
	}
	healthTimeout := cfg.HealthTimeout
	if healthTimeout <= 0 {
		healthTimeout = defaultHealthTimeout
	}
	return &client{cli: cli, healthTimeout: healthTimeout, login: login}, nil
}

func clientConfig(cfg Config) clientv3.Config {
	dialTimeout := cfg.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = defaultDialTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	return clientv3.Config{
		Endpoints:   cfg.Endpoints,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		DialTimeout: dialTimeout,
		// Keepalives let a long-lived operator client notice a member that
		// vanished without closing its connections (a deleted Pod, a partition).
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		DialOptions:          []grpc.DialOption{grpc.WithConnectParams(reconnectParams(dialTimeout))},
		Logger:               logger,
	}
}

// reconnectBackoffMax caps the wait between gRPC's attempts to reach a member. gRPC's own cap
// is two minutes: a client made while a cluster's Pods were still being created (after a
// resume, at bootstrap, with a member replaced) kept failing to reach members that had long
// come up, and the operator took a quorum that was back for a quorum lost. Members are few,
// so trying each every couple of seconds costs nothing.
const reconnectBackoffMax = 2 * time.Second

func reconnectParams(dialTimeout time.Duration) grpc.ConnectParams {
	b := backoff.DefaultConfig
	b.BaseDelay = 250 * time.Millisecond
	b.MaxDelay = reconnectBackoffMax
	return grpc.ConnectParams{Backoff: b, MinConnectTimeout: dialTimeout}
}

func (c *client) Close() error { return c.cli.Close() }

func (c *client) MemberList(ctx context.Context) (uint64, []Member, error) {
	// Linearizable is clientv3's default (no WithSerializable): the answer
	// comes through the leader, so a member added a moment ago is included.
	resp, err := c.cli.MemberList(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("etcd member list: %w", translateError(err))
	}
	return resp.Header.GetClusterId(), membersFromPB(resp.Members), nil
}

func (c *client) AddLearner(ctx context.Context, peerURLs []string) (Member, []Member, error) {
	resp, err := c.cli.MemberAddAsLearner(ctx, peerURLs)
	if err != nil {
		return Member{}, nil, fmt.Errorf("etcd add learner %v: %w", peerURLs, translateError(err))
	}
	return memberFromPB(resp.Member), membersFromPB(resp.Members), nil
}

// Promote asks the leader itself. A follower forwards a promotion to the leader over the peer
// connection, carrying the caller's token but not the common name of its client certificate:
// with authentication on, a client that is root by its certificate (no password, as the
// legacy etcd.aenix.io operator runs root) is no user at the leader, which refuses, and the
// follower retries until etcd's request timeout ("etcdserver: request timed out"), at every
// attempt that does not happen to reach the leader. leader, the endpoint the caller last saw
// the leader serve, is asked alone whether it still leads (findLeader); when it is empty or no
// longer leads, every endpoint is asked. When no endpoint names a leader, the request goes
// wherever the balancer sends it, as before.
func (c *client) Promote(ctx context.Context, id uint64, leader string) error {
	leaderEndpoint, _, findErr := c.findLeaderEndpoint(ctx, leader)
	var err error
	if findErr == nil {
		err = c.withCluster(leaderEndpoint, func(cl clientv3.Cluster) error {
			_, err := cl.MemberPromote(ctx, id)
			return err
		})
	} else {
		_, err = c.cli.MemberPromote(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("etcd promote member %x: %w", id, translateError(err))
	}
	return nil
}

func (c *client) Remove(ctx context.Context, id uint64) error {
	_, err := c.cli.MemberRemove(ctx, id)
	if errors.Is(err, rpctypes.ErrStopped) && c.isGone(ctx, id) {
		// The member being removed served the request itself and shut down
		// on applying it, before it could answer: the removal did happen.
		return nil
	}
	if err != nil {
		return fmt.Errorf("etcd remove member %x: %w", id, translateError(err))
	}
	return nil
}

// isGone reports whether MemberList (answered by another member) no longer
// lists id; false when that cannot be established.
func (c *client) isGone(ctx context.Context, id uint64) bool {
	_, members, err := c.MemberList(ctx)
	if err != nil {
		return false
	}
	return !slices.ContainsFunc(members, func(m Member) bool { return m.ID == id })
}

func (c *client) Status(ctx context.Context, endpoint string) (Status, error) {
	resp, err := c.cli.Status(ctx, endpoint)
	if err != nil {
		return Status{}, fmt.Errorf("etcd status of %s: %w", endpoint, translateError(err))
	}
	return statusFromPB(resp), nil
}

func (c *client) Healthy(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, c.healthTimeout)
	defer cancel()
	err := c.withEndpoint(endpoint, func(kv clientv3.KV, _ clientv3.Maintenance) error {
		// A linearizable read needs the leader and a quorum behind this member,
		// which is what "healthy" means to etcdctl too. Which key is irrelevant.
		_, err := kv.Get(ctx, "health")
		return err
	})
	// With auth on, a user may lack read access to the key; the request still
	// got through raft, so the endpoint is healthy (etcdctl agrees).
	if err == nil || errors.Is(err, rpctypes.ErrPermissionDenied) {
		return nil
	}
	return fmt.Errorf("etcd endpoint %s unhealthy: %w", endpoint, translateError(err))
}

func (c *client) Defragment(ctx context.Context, endpoint string) error {
	if _, err := c.cli.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("etcd defragment %s: %w", endpoint, translateError(err))
	}
	return nil
}

func (c *client) CompactToCurrent(ctx context.Context) (int64, error) {
	return c.CompactKeeping(ctx, 0)
}

func (c *client) CompactKeeping(ctx context.Context, keep int64) (int64, error) {
	// Any read's header carries the current revision; the key need not exist.
	resp, err := c.cli.Get(ctx, "compact", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd current revision: %w", translateError(err))
	}
	rev := resp.Header.GetRevision() - keep
	if rev <= 0 {
		return 0, nil
	}
	_, err = c.cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
	// ErrCompacted: etcd's own auto-compaction is past rev already.
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return 0, fmt.Errorf("etcd compact to revision %d: %w", rev, translateError(err))
	}
	return rev, nil
}

func (c *client) Alarms(ctx context.Context) ([]Alarm, error) {
	resp, err := c.cli.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd alarm list: %w", translateError(err))
	}
	alarms := make([]Alarm, 0, len(resp.Alarms))
	for _, a := range resp.Alarms {
		alarms = append(alarms, Alarm{MemberID: a.MemberID, Type: a.Alarm.String()})
	}
	return alarms, nil
}

func (c *client) DisarmAlarm(ctx context.Context, a Alarm) error {
	alarmType, ok := etcdserverpb.AlarmType_value[a.Type]
	// Refuse NONE and ID 0 here: etcd reads them as "every alarm", which is a
	// far bigger action than the caller named.
	if !ok || alarmType == int32(etcdserverpb.AlarmType_NONE) || a.MemberID == 0 {
		return fmt.Errorf("etcd disarm alarm: invalid alarm %+v", a)
	}
	_, err := c.cli.AlarmDisarm(ctx, &clientv3.AlarmMember{
		MemberID: a.MemberID,
		Alarm:    etcdserverpb.AlarmType(alarmType),
	})
	if err != nil {
		return fmt.Errorf("etcd disarm alarm %s on %x: %w", a.Type, a.MemberID, translateError(err))
	}
	return nil
}

func (c *client) DowngradeValidate(ctx context.Context, version string) (string, error) {
	resp, err := c.cli.Downgrade(ctx, clientv3.DowngradeValidate, version)
	if err != nil {
		return "", fmt.Errorf("etcd downgrade validate %s: %w", version, translateError(err))
	}
	return resp.Version, nil
}

func (c *client) DowngradeEnable(ctx context.Context, version string) (string, error) {
	resp, err := c.cli.Downgrade(ctx, clientv3.DowngradeEnable, version)
	if err != nil {
		return "", fmt.Errorf("etcd downgrade enable %s: %w", version, translateError(err))
	}
	return resp.Version, nil
}

func (c *client) DowngradeCancel(ctx context.Context) error {
	// etcd ignores the version of a cancel.
	if _, err := c.cli.Downgrade(ctx, clientv3.DowngradeCancel, ""); err != nil {
		return fmt.Errorf("etcd downgrade cancel: %w", translateError(err))
	}
	return nil
}

// withEndpoint runs fn with KV and Maintenance APIs bound to exactly one
// endpoint, with the client's credentials. The balanced connection would pick
// any endpoint, which is wrong for per-member probes and leader-only requests.
func (c *client) withEndpoint(endpoint string, fn func(clientv3.KV, clientv3.Maintenance) error) error {
	conn, err := c.cli.Dial(endpoint)
	if err != nil {
		return fmt.Errorf("dial %s: %w", endpoint, err)
	}
	defer func() { _ = conn.Close() }()
	kv := clientv3.NewKVFromKVClient(etcdserverpb.NewKVClient(conn), c.cli)
	maintenance := clientv3.NewMaintenanceFromMaintenanceClient(etcdserverpb.NewMaintenanceClient(conn), c.cli)
	return fn(kv, maintenance)
}

// withCluster runs fn with the cluster API of one endpoint alone, through a connection with
// the client's credentials.
func (c *client) withCluster(endpoint string, fn func(clientv3.Cluster) error) error {
	conn, err := c.cli.Dial(endpoint)
	if err != nil {
		return fmt.Errorf("dial %s: %w", endpoint, err)
	}
	defer func() { _ = conn.Close() }()
	return fn(clientv3.NewClusterFromClusterClient(etcdserverpb.NewClusterClient(conn), c.cli))
}

func membersFromPB(in []*etcdserverpb.Member) []Member {
	out := make([]Member, 0, len(in))
	for _, m := range in {
		out = append(out, memberFromPB(m))
	}
	return out
}

func memberFromPB(m *etcdserverpb.Member) Member {
	if m == nil {
		return Member{}
	}
	return Member{
		ID:         m.ID,
		Name:       m.Name,
		PeerURLs:   append([]string(nil), m.PeerURLs...),
		ClientURLs: append([]string(nil), m.ClientURLs...),
		IsLearner:  m.IsLearner,
	}
}

func statusFromPB(resp *clientv3.StatusResponse) Status {
	return Status{
		MemberID:         resp.Header.GetMemberId(),
		ClusterID:        resp.Header.GetClusterId(),
		Leader:           resp.Leader,
		Version:          resp.Version,
		DBSize:           resp.DbSize,
		DBSizeInUse:      resp.DbSizeInUse,
		DBSizeQuota:      resp.DbSizeQuota,
		RaftIndex:        resp.RaftIndex,
		RaftAppliedIndex: resp.RaftAppliedIndex,
		RaftTerm:         resp.RaftTerm,
		Revision:         resp.Header.GetRevision(),
		IsLearner:        resp.IsLearner,
		Errors:           append([]string(nil), resp.Errors...),
		StorageVersion:   resp.StorageVersion,
		Downgrade:        downgradeFromPB(resp.DowngradeInfo),
	}
}

func downgradeFromPB(d *etcdserverpb.DowngradeInfo) *DowngradeInfo {
	if d == nil {
		return nil
	}
	return &DowngradeInfo{Enabled: d.Enabled, TargetVersion: d.TargetVersion}
}

func (c *client) AuthStatus(ctx context.Context) (bool, error) {
	resp, err := c.cli.AuthStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("etcd auth status: %w", translateError(err))
	}
	return resp.Enabled, nil
}

func (c *client) Authenticate(ctx context.Context, user, password string) error {
	if _, err := c.cli.Authenticate(ctx, user, password); err != nil {
		return fmt.Errorf("etcd authenticate %s: %w", user, translateError(err))
	}
	return nil
}

func (c *client) UserAdd(ctx context.Context, user, password string) error {
	if _, err := c.cli.UserAdd(ctx, user, password); err != nil {
		return fmt.Errorf("etcd add user %s: %w", user, translateError(err))
	}
	return nil
}

func (c *client) UserGrantRole(ctx context.Context, user, role string) error {
	if _, err := c.cli.UserGrantRole(ctx, user, role); err != nil {
		return fmt.Errorf("etcd grant role %s to %s: %w", role, user, translateError(err))
	}
	return nil
}

func (c *client) UserChangePassword(ctx context.Context, user, password string) error {
	if _, err := c.cli.UserChangePassword(ctx, user, password); err != nil {
		return fmt.Errorf("etcd change password of %s: %w", user, translateError(err))
	}
	return nil
}

func (c *client) UserList(ctx context.Context) ([]string, error) {
	resp, err := c.cli.UserList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd user list: %w", translateError(err))
	}
	return resp.Users, nil
}

func (c *client) RoleList(ctx context.Context) ([]string, error) {
	resp, err := c.cli.RoleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd role list: %w", translateError(err))
	}
	return resp.Roles, nil
}

func (c *client) AuthEnable(ctx context.Context) error {
	if _, err := c.cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("etcd enable auth: %w", translateError(err))
	}
	return nil
}
