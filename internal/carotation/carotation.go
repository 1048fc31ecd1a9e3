// Package carotation decides the next step of rotating an EtcdCluster's CAs, from what was
// observed: the stage recorded in status, the issuers the Certificates name and spec.tls
// wants, the CA bundle Secret, the members and what they serve. It acts on nothing.
//
// The order follows what etcd reads again by itself (internal/etcd,
// TestCertificateFilesAreReadAtEachHandshakeTrustedCAsOnlyAtStart): a certificate file at
// every handshake, a trusted CA file only at start. So members first restart, one at a time,
// trusting both the old and the new CAs; then the Certificates are re-issued by the new
// issuers, which etcd serves without a restart; once every member serves them and the
// operator's client presents its new certificate, the old CAs are dropped from the bundle and
// members restart once more. Every stage is recorded before the step that needs it acts, and
// each step looks before it acts, so an operator restarted at any point resumes without
// repeating a destructive step.
package carotation

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
)

// Action is what the operator does next.
type Action string

const (
	// None: no rotation is wanted or the recorded one is done.
	None Action = ""
	// Record writes Decision.Status into the cluster's status before anything else acts:
	// the start of a rotation or the next stage.
	Record Action = "Record"
	// Probe asks each new issuer for a certificate of the operator's own, to learn its CA.
	Probe Action = "Probe"
	// WriteBundle writes the CAs of the stage into <cluster>-ca-bundle.
	WriteBundle Action = "WriteBundle"
	// MarkMembers sets the bundle's fingerprint on every member's spec: the rolling restart
	// (one member at a time, leader last, only while every voter is healthy) then restarts
	// their Pods.
	MarkMembers Action = "MarkMembers"
	// Wait: something outside the operator's step is under way (a restart, cert-manager, the
	// kubelet); look again later.
	Wait Action = "Wait"
	// CleanUp deletes the probe Certificates and their Secrets, then records the rotation done.
	CleanUp Action = "CleanUp"
)

// Observed is what the decision needs, each part read before deciding.
type Observed struct {
	// Status is the recorded rotation (nil: none ever).
	Status *etcdv1.CARotationStatus
	// Applied are the issuers the cluster's Certificates name now; Wanted the issuers
	// spec.tls names. A Certificate not made yet is absent from Applied.
	Applied, Wanted []etcdv1.CertificateIssuer
	// NewCAsKnown: the probe Certificate of every issuer the rotation moves to is issued,
	// so its CA can go into the bundle.
	NewCAsKnown bool
	// BundleCurrent: <cluster>-ca-bundle holds the CAs this stage needs (old and new while
	// trusting both, new alone while dropping).
	BundleCurrent bool
	// MembersMarked: every member's spec names the bundle with the current fingerprint.
	MembersMarked bool
	// MembersRestarted: every member's Pod was started from its spec as it is now and is
	// Ready, so every etcd trusts the bundle's CAs.
	MembersRestarted bool
	// Reissued: every re-issued Secret holds a certificate of its new CA, and every member
	// serves it on the ports it secures.
	Reissued bool
	// OperatorClientMoved: the operator's etcd client presents its certificate of the new
	// client CA, and etcd answered it.
	OperatorClientMoved bool
}

// Decision is the next step and, for Record and CleanUp, the status to record.
type Decision struct {
	Action Action
	// Status is what to record (Record, CleanUp).
	Status *etcdv1.CARotationStatus
	// Why says it for the condition and the log.
	Why string
	// Quiet records without a condition or an event: a first look, not a rotation.
	Quiet bool
}

// Active is true while a rotation is under way (recorded and not done).
func Active(s *etcdv1.CARotationStatus) bool {
	return s != nil && s.Stage != "" && s.Stage != etcdv1.ReasonCARotated
}

// IssuerNow is the issuer the named Certificate must name while s is recorded. moving is
// false when that is the one it names already, whatever spec.tls says: outside a rotation (a
// changed issuer waits for the rotation to be recorded) and until the members trust the new
// CAs, a Certificate re-issued by a new issuer would serve a certificate its peers and clients
// refuse. From ReissuingOnNewCA on, a Certificate the rotation moves names the issuer it moves
// to (s.To), and every other keeps its own: a change of spec.tls meanwhile is the next
// rotation, never a certificate from a CA the bundle does not hold.
func IssuerNow(s *etcdv1.CARotationStatus, certificate string) (issuer etcdv1.IssuerReference, moving bool) {
	if !Active(s) || s.Stage == etcdv1.ReasonTrustingBoth {
		return etcdv1.IssuerReference{}, false
	}
	i := slices.IndexFunc(s.To, func(to etcdv1.CertificateIssuer) bool { return to.Certificate == certificate })
	if i < 0 {
		return etcdv1.IssuerReference{}, false
	}
	return s.To[i].Issuer, true
}

// TrustsBoth is true in the stages whose bundle holds the old and the new CAs.
func TrustsBoth(s *etcdv1.CARotationStatus) bool {
	return Active(s) && s.Stage != etcdv1.ReasonDroppingOldCA
}

// Changed are the issuers of want that differ from those applied; a Certificate that
// does not exist yet is no change (it is simply issued).
func Changed(applied, want []etcdv1.CertificateIssuer) []etcdv1.CertificateIssuer {
	var out []etcdv1.CertificateIssuer
	for _, w := range want {
		i := slices.IndexFunc(applied, func(a etcdv1.CertificateIssuer) bool { return a.Certificate == w.Certificate })
		if i >= 0 && !sameIssuer(applied[i].Issuer, w.Issuer) {
			out = append(out, w)
		}
	}
	return out
}

func sameIssuer(a, b etcdv1.IssuerReference) bool {
	kind := func(k string) string {
		if k == "" {
			return "Issuer"
		}
		return k
	}
	return a.Name == b.Name && kind(a.Kind) == kind(b.Kind)
}

// Next is the step to take.
func Next(o Observed) Decision {
	s := o.Status
	if !Active(s) {
		return start(o)
	}
	switch s.Stage {
	case etcdv1.ReasonTrustingBoth:
		return trustingBoth(o)
	case etcdv1.ReasonReissuingOnNewCA:
		switch {
		case !o.NewCAsKnown:
			// A probe deleted meanwhile: its CA is what the re-issued certificates are
			// checked against.
			return Decision{Action: Probe, Why: "asking the new issuers of " + names(s.To) + " again for a certificate, to learn their CAs"}
		case !o.Reissued:
			return Decision{Action: Wait, Why: "waiting for cert-manager to re-issue " + names(s.To) + " from the new CAs and every member to serve them"}
		case !o.OperatorClientMoved:
			return Decision{Action: Wait, Why: "waiting for the operator's client to present its certificate of the new CA"}
		}
		return advance(s, etcdv1.ReasonOperatorClientMoved, "every member serves certificates of the new CAs and the operator's client presents its new one")
	case etcdv1.ReasonOperatorClientMoved:
		// Recorded before the bundle loses the old CAs: from here on it holds the new ones
		// alone, and a restarted operator must not write the old ones back.
		return advance(s, etcdv1.ReasonDroppingOldCA, "dropping the old CAs: members restart, one at a time, trusting the new CAs alone")
	case etcdv1.ReasonDroppingOldCA:
		return droppingOldCA(o)
	}
	return Decision{Action: Wait, Why: fmt.Sprintf("unknown stage %q recorded: nothing is done until it is cleared", s.Stage)}
}

// start begins a rotation when an issuer changed.
func start(o Observed) Decision {
	changed := Changed(o.Applied, o.Wanted)
	if len(changed) == 0 {
		return Decision{Action: None}
	}
	var from []etcdv1.CertificateIssuer
	for _, c := range changed {
		i := slices.IndexFunc(o.Applied, func(a etcdv1.CertificateIssuer) bool { return a.Certificate == c.Certificate })
		from = append(from, o.Applied[i])
	}
	return Decision{Action: Record, Status: &etcdv1.CARotationStatus{Stage: etcdv1.ReasonTrustingBoth, From: from, To: changed},
		Why: fmt.Sprintf("the issuers of %s changed: rotating their CAs, members first trust the old and the new", names(changed))}
}

// rollBundle is the next step of writing cas into the CA bundle and restarting every member,
// one at a time, to trust them; rolling is false once every member restarted trusting them.
func rollBundle(o Observed, cas string) (d Decision, rolling bool) {
	switch {
	case !o.BundleCurrent:
		return Decision{Action: WriteBundle, Why: "writing " + cas + " into the CA bundle"}, true
	case !o.MembersMarked:
		return Decision{Action: MarkMembers, Why: "members restart, one at a time, to trust " + cas}, true
	case !o.MembersRestarted:
		return Decision{Action: Wait, Why: "waiting for every member to restart trusting " + cas}, true
	}
	return Decision{}, false
}

func trustingBoth(o Observed) Decision {
	if !o.NewCAsKnown {
		return Decision{Action: Probe, Why: "asking the new issuers of " + names(o.Status.To) + " for a certificate, to learn their CAs"}
	}
	if d, rolling := rollBundle(o, "the old and the new CAs"); rolling {
		return d
	}
	return advance(o.Status, etcdv1.ReasonReissuingOnNewCA, "every member trusts both CAs: the Certificates move to the new issuers")
}

func droppingOldCA(o Observed) Decision {
	if d, rolling := rollBundle(o, "the new CAs alone"); rolling {
		return d
	}
	done := o.Status.DeepCopy()
	done.Stage = etcdv1.ReasonCARotated
	return Decision{Action: CleanUp, Status: done, Why: "the CAs of " + names(o.Status.To) + " are rotated"}
}

func advance(s *etcdv1.CARotationStatus, stage, why string) Decision {
	next := s.DeepCopy()
	next.Stage = stage
	return Decision{Action: Record, Status: next, Why: why}
}

func names(issuers []etcdv1.CertificateIssuer) string {
	out := ""
	for i, c := range issuers {
		if i > 0 {
			out += ", "
		}
		out += c.Certificate
	}
	return out
}

// SecretsObserved is what NextForSecrets needs, for a cluster whose certificates are its own
// Secrets (no cert-manager): the user rotates a CA by putting the new CA into ca.crt beside
// the old one, then the certificates of the new CA into tls.crt and tls.key, then taking the
// old CA out of ca.crt. etcd serves new certificate files at the next handshake; it is each
// change of ca.crt that members must restart for.
type SecretsObserved struct {
	// Status is the recorded rotation (nil: none ever).
	Status *etcdv1.CARotationStatus
	// Current fingerprints the ca.crt of the Secrets as they are now.
	Current string
	// MembersMarked: every member's spec carries the recorded fingerprint.
	MembersMarked bool
	// MembersRestarted: every member's Pod was started from its spec as it is now and is
	// Ready.
	MembersRestarted bool
	// Now is the time of the look.
	Now time.Time
}

// Settle is how long a changed ca.crt must stay as it is before members restart for it: the
// user updates the server and the peer Secret one after the other, and members restarted for
// the first change alone would restart again for the second.
const Settle = 10 * time.Second

// NextForSecrets is the step to take for a cluster with its own certificate Secrets.
func NextForSecrets(o SecretsObserved) Decision {
	s := o.Status
	switch {
	case s == nil || s.SecretsHash == "":
		// The first look: members run with the ca.crt they were started with, taken to be
		// this one (a change made before the operator looked cannot be told apart).
		rec := &etcdv1.CARotationStatus{Stage: etcdv1.ReasonCARotated}
		if s != nil {
			rec = s.DeepCopy()
		}
		rec.SecretsHash = o.Current
		return Decision{Action: Record, Status: rec, Quiet: true, Why: "recorded the CAs the members trust (the ca.crt of the cluster's Secrets)"}
	case s.SecretsHash != o.Current:
		// A change, or another during a restart: every member loads the newest.
		rec := s.DeepCopy()
		rec.Stage, rec.SecretsHash = etcdv1.ReasonReloadingCAs, o.Current
		rec.StartedAt = &metav1.Time{Time: o.Now}
		return Decision{Action: Record, Status: rec, Why: "the ca.crt of the cluster's Secrets changed: members restart, one at a time, to load it"}
	case s.Stage != etcdv1.ReasonReloadingCAs:
		return Decision{Action: None}
	case !o.MembersMarked && s.StartedAt != nil && o.Now.Before(s.StartedAt.Add(Settle)):
		return Decision{Action: Wait, Why: "the ca.crt of the cluster's Secrets changed: members restart once it stays as it is for " + Settle.String()}
	case !o.MembersMarked:
		return Decision{Action: MarkMembers, Why: "members restart, one at a time, to load the changed ca.crt"}
	case !o.MembersRestarted:
		return Decision{Action: Wait, Why: "waiting for every member to restart with the changed ca.crt"}
	}
	done := s.DeepCopy()
	done.Stage = etcdv1.ReasonCARotated
	return Decision{Action: Record, Status: done, Why: "every member trusts the CAs of the changed ca.crt"}
}
