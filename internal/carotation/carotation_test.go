package carotation

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

func issuer(cert, name string) etcdv1.CertificateIssuer {
	return etcdv1.CertificateIssuer{Certificate: cert, Issuer: etcdv1.IssuerReference{Name: name}}
}

func at(stage string) *etcdv1.CARotationStatus {
	return &etcdv1.CARotationStatus{Stage: stage, From: []etcdv1.CertificateIssuer{issuer("db-peer-tls", "old")},
		To: []etcdv1.CertificateIssuer{issuer("db-peer-tls", "new")}}
}

func TestNext(t *testing.T) {
	oldIssuers := []etcdv1.CertificateIssuer{issuer("db-server-tls", "old"), issuer("db-peer-tls", "old")}
	newPeer := []etcdv1.CertificateIssuer{issuer("db-server-tls", "old"), issuer("db-peer-tls", "new")}
	all := Observed{NewCAsKnown: true, BundleCurrent: true, MembersMarked: true, MembersRestarted: true, Reissued: true, OperatorClientMoved: true}
	with := func(o Observed, s *etcdv1.CARotationStatus) Observed { o.Status = s; return o }
	cases := []struct {
		name      string
		in        Observed
		want      Action
		wantStage string
	}{
		{"nothing changed", Observed{Applied: oldIssuers, Wanted: oldIssuers}, None, ""},
		{"a new cluster's Certificates not made yet", Observed{Wanted: oldIssuers}, None, ""},
		{"an issuer kind written out is no change", Observed{Applied: []etcdv1.CertificateIssuer{{Certificate: "db-peer-tls", Issuer: etcdv1.IssuerReference{Name: "old", Kind: "Issuer"}}},
			Wanted: []etcdv1.CertificateIssuer{issuer("db-peer-tls", "old")}}, None, ""},
		{"an issuer changed starts a rotation, recorded first", Observed{Applied: oldIssuers, Wanted: newPeer}, Record, etcdv1.ReasonTrustingBoth},
		{"the last rotation done, another change starts the next", Observed{Status: at(etcdv1.ReasonCARotated), Applied: oldIssuers, Wanted: newPeer}, Record, etcdv1.ReasonTrustingBoth},
		{"done and nothing changed", with(all, at(etcdv1.ReasonCARotated)), None, ""},
		{"trusting both: learn the new CAs first", Observed{Status: at(etcdv1.ReasonTrustingBoth)}, Probe, ""},
		{"trusting both: write the bundle", Observed{Status: at(etcdv1.ReasonTrustingBoth), NewCAsKnown: true}, WriteBundle, ""},
		{"trusting both: mark the members", Observed{Status: at(etcdv1.ReasonTrustingBoth), NewCAsKnown: true, BundleCurrent: true}, MarkMembers, ""},
		{"trusting both: the roll is under way", Observed{Status: at(etcdv1.ReasonTrustingBoth), NewCAsKnown: true, BundleCurrent: true, MembersMarked: true}, Wait, ""},
		{"trusting both: every member restarted", with(all, at(etcdv1.ReasonTrustingBoth)), Record, etcdv1.ReasonReissuingOnNewCA},
		{"a bundle changed under a marked member is written again first", Observed{Status: at(etcdv1.ReasonTrustingBoth), NewCAsKnown: true, MembersMarked: true, MembersRestarted: true}, WriteBundle, ""},
		{"reissuing: a probe gone is asked for again", with(Observed{}, at(etcdv1.ReasonReissuingOnNewCA)), Probe, ""},
		{"reissuing: cert-manager not done", with(Observed{NewCAsKnown: true}, at(etcdv1.ReasonReissuingOnNewCA)), Wait, ""},
		{"reissuing: the operator's client not moved", with(Observed{NewCAsKnown: true, Reissued: true}, at(etcdv1.ReasonReissuingOnNewCA)), Wait, ""},
		{"reissuing: done", with(all, at(etcdv1.ReasonReissuingOnNewCA)), Record, etcdv1.ReasonOperatorClientMoved},
		{"client moved: record the drop before the bundle loses the old CAs", with(Observed{}, at(etcdv1.ReasonOperatorClientMoved)), Record, etcdv1.ReasonDroppingOldCA},
		{"dropping: write the new CAs alone", with(Observed{MembersMarked: true, MembersRestarted: true}, at(etcdv1.ReasonDroppingOldCA)), WriteBundle, ""},
		{"dropping: mark the members", with(Observed{BundleCurrent: true}, at(etcdv1.ReasonDroppingOldCA)), MarkMembers, ""},
		{"dropping: the roll is under way", with(Observed{BundleCurrent: true, MembersMarked: true}, at(etcdv1.ReasonDroppingOldCA)), Wait, ""},
		{"dropping: every member restarted", with(all, at(etcdv1.ReasonDroppingOldCA)), CleanUp, etcdv1.ReasonCARotated},
		{"a spec change during a rotation waits for it", with(Observed{Applied: oldIssuers, Wanted: newPeer, NewCAsKnown: true}, at(etcdv1.ReasonReissuingOnNewCA)), Wait, ""},
		{"an unknown stage acts on nothing", with(all, at("Bogus")), Wait, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkDecision(t, "Next", Next(tc.in), tc.want, tc.wantStage)
		})
	}
}

// checkDecision fails the test unless decision d of what is the action want and records the
// stage wantStage, or nothing when wantStage is "". True when it records a stage, for the
// caller's further checks of it.
func checkDecision(t *testing.T, what string, d Decision, want Action, wantStage string) bool {
	t.Helper()
	if d.Action != want {
		t.Fatalf("%s = %s (%s); want %s", what, d.Action, d.Why, want)
	}
	if wantStage == "" {
		if d.Status != nil {
			t.Fatalf("%s records %+v; want nothing recorded", what, d.Status)
		}
		return false
	}
	if d.Status == nil || d.Status.Stage != wantStage {
		t.Fatalf("%s records %+v; want stage %s", what, d.Status, wantStage)
	}
	return true
}

func TestStartRecordsOnlyTheChangedIssuers(t *testing.T) {
	d := Next(Observed{
		Applied: []etcdv1.CertificateIssuer{issuer("db-server-tls", "a"), issuer("db-peer-tls", "a")},
		Wanted:  []etcdv1.CertificateIssuer{issuer("db-server-tls", "a"), issuer("db-peer-tls", "b")},
	})
	if d.Status == nil || len(d.Status.From) != 1 || d.Status.From[0] != issuer("db-peer-tls", "a") ||
		len(d.Status.To) != 1 || d.Status.To[0] != issuer("db-peer-tls", "b") {
		t.Fatalf("recorded %+v; want from db-peer-tls/a to db-peer-tls/b", d.Status)
	}
}

// The Certificates keep their issuers until every member trusts both CAs; from then on the
// ones the rotation moves name the issuers it moves them to, whatever spec.tls says, and the
// others keep theirs.
func TestIssuerNowHoldsUntilEveryMemberTrustsBothThenFollowsTheRotation(t *testing.T) {
	newPeer := issuer("db-peer-tls", "new").Issuer
	for stage, want := range map[string]*etcdv1.IssuerReference{
		"": nil, etcdv1.ReasonCARotated: nil, etcdv1.ReasonTrustingBoth: nil,
		etcdv1.ReasonReissuingOnNewCA: &newPeer, etcdv1.ReasonOperatorClientMoved: &newPeer, etcdv1.ReasonDroppingOldCA: &newPeer,
	} {
		got, moving := IssuerNow(at(stage), "db-peer-tls")
		if moving != (want != nil) || want != nil && got != *want {
			t.Errorf("db-peer-tls at %q: %+v, moving %t; want %+v", stage, got, moving, want)
		}
		if _, moving := IssuerNow(at(stage), "db-server-tls"); moving {
			t.Errorf("db-server-tls, which the rotation does not move, moves at %q", stage)
		}
	}
	if _, moving := IssuerNow(nil, "db-peer-tls"); moving {
		t.Error("a Certificate moves without a rotation; want its issuer held (an issuer change waits for the rotation to be recorded)")
	}
	for stage, both := range map[string]bool{
		etcdv1.ReasonTrustingBoth: true, etcdv1.ReasonReissuingOnNewCA: true, etcdv1.ReasonOperatorClientMoved: true,
		etcdv1.ReasonDroppingOldCA: false, etcdv1.ReasonCARotated: false,
	} {
		if got := TrustsBoth(at(stage)); got != both {
			t.Errorf("TrustsBoth at %q = %t; want %t", stage, got, both)
		}
	}
}

func TestNextForSecrets(t *testing.T) {
	rec := func(stage, hash string) *etcdv1.CARotationStatus {
		return &etcdv1.CARotationStatus{Stage: stage, SecretsHash: hash}
	}
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	since := func(stage, hash string, at time.Time) *etcdv1.CARotationStatus {
		r := rec(stage, hash)
		r.StartedAt = &metav1.Time{Time: at}
		return r
	}
	cases := []struct {
		name      string
		in        SecretsObserved
		want      Action
		wantStage string
		wantHash  string
	}{
		{"the first look records what members trust, restarting nobody", SecretsObserved{Current: "a"}, Record, etcdv1.ReasonCARotated, "a"},
		{"a cert-manager rotation's record gains the fingerprint", SecretsObserved{Status: rec(etcdv1.ReasonCARotated, ""), Current: "a"}, Record, etcdv1.ReasonCARotated, "a"},
		{"unchanged", SecretsObserved{Status: rec(etcdv1.ReasonCARotated, "a"), Current: "a"}, None, "", ""},
		{"ca.crt changed: recorded before any restart", SecretsObserved{Status: rec(etcdv1.ReasonCARotated, "a"), Current: "b"}, Record, etcdv1.ReasonReloadingCAs, "b"},
		{"changed again during the restarts: the newest is loaded", SecretsObserved{Status: rec(etcdv1.ReasonReloadingCAs, "b"), Current: "c", MembersMarked: true}, Record, etcdv1.ReasonReloadingCAs, "c"},
		{"mark the members", SecretsObserved{Status: rec(etcdv1.ReasonReloadingCAs, "b"), Current: "b"}, MarkMembers, "", ""},
		{"a change younger than Settle waits for the next Secret", SecretsObserved{Status: since(etcdv1.ReasonReloadingCAs, "b", t0), Current: "b", Now: t0.Add(Settle - time.Second)}, Wait, "", ""},
		{"a change that settled marks the members", SecretsObserved{Status: since(etcdv1.ReasonReloadingCAs, "b", t0), Current: "b", Now: t0.Add(Settle)}, MarkMembers, "", ""},
		{"the roll is under way", SecretsObserved{Status: rec(etcdv1.ReasonReloadingCAs, "b"), Current: "b", MembersMarked: true}, Wait, "", ""},
		{"every member restarted", SecretsObserved{Status: rec(etcdv1.ReasonReloadingCAs, "b"), Current: "b", MembersMarked: true, MembersRestarted: true}, Record, etcdv1.ReasonCARotated, "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := NextForSecrets(tc.in)
			if !checkDecision(t, "NextForSecrets", d, tc.want, tc.wantStage) {
				return
			}
			if d.Status.SecretsHash != tc.wantHash {
				t.Fatalf("records %+v; want stage %s hash %s", d.Status, tc.wantStage, tc.wantHash)
			}
			if tc.wantStage == etcdv1.ReasonReloadingCAs && (d.Status.StartedAt == nil || !d.Status.StartedAt.Time.Equal(tc.in.Now)) {
				t.Fatalf("a change recorded at %v with StartedAt %v; want the time of the look", tc.in.Now, d.Status.StartedAt)
			}
		})
	}
}
