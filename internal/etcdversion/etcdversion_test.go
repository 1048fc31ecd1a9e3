package etcdversion

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Version
		ok   bool
	}{
		{"3.6.16", Version{3, 6, 16}, true},
		{"v3.5.21", Version{3, 5, 21}, true},
		{"3.7.3", Version{3, 7, 3}, true},
		{"10.20.30", Version{10, 20, 30}, true},
		{"vv3.5.21", Version{}, false},
		{"V3.5.21", Version{}, false},
		{"3.5", Version{}, false},
		{"3.5.1.2", Version{}, false},
		{"3.5.x", Version{}, false},
		{"3.5.-1", Version{}, false},
		{"3.5.+1", Version{}, false},
		{"3..1", Version{}, false},
		{"", Version{}, false},
		{"3.6.0-rc.1", Version{}, false},
	}
	for _, tt := range tests {
		got, ok := Parse(tt.in)
		if ok != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{"v3.5.21": "3.5.21", "3.6.16": "3.6.16", "latest": "latest", "": ""} {
		if got := Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"3.5.35", "3.6.0", -1},
		{"3.6.0", "3.5.35", 1},
		{"3.5.9", "3.5.10", -1},
		{"v3.5.21", "3.5.21", 0},
		{"2.9.9", "3.0.0", -1},
		{"3.7.3", "3.6.16", 1},
	}
	for _, tt := range tests {
		a, b := MustParse(tt.a), MustParse(tt.b)
		if got := a.Compare(b); got != tt.want {
			t.Errorf("%s.Compare(%s) = %d; want %d", a, b, got, tt.want)
		}
		if got := a.Less(b); got != (tt.want < 0) {
			t.Errorf("%s.Less(%s) = %t", a, b, got)
		}
	}
}

func TestNewerMinor(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"3.6.0", "3.5.35", true},
		{"3.5.35", "3.5.0", false},
		{"3.5.35", "3.6.0", false},
		{"4.0.0", "3.9.9", true},
	}
	for _, tt := range tests {
		if got := MustParse(tt.a).NewerMinor(MustParse(tt.b)); got != tt.want {
			t.Errorf("%s.NewerMinor(%s) = %t; want %t", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestHasLivezReadyz(t *testing.T) {
	tests := map[string]bool{"3.5.0": false, "3.5.10": false, "3.5.11": true, "3.5.35": true, "3.6.0": true, "3.7.3": true}
	for in, want := range tests {
		if got := MustParse(in).HasLivezReadyz(); got != want {
			t.Errorf("%s.HasLivezReadyz() = %t; want %t", in, got, want)
		}
	}
}

func TestHasStorageVersion(t *testing.T) {
	tests := map[string]bool{"3.5.0": false, "3.5.35": false, "3.6.0": true, "3.6.16": true, "3.7.3": true}
	for in, want := range tests {
		if got := MustParse(in).HasStorageVersion(); got != want {
			t.Errorf("%s.HasStorageVersion() = %t; want %t", in, got, want)
		}
	}
}

func TestReportsDefaultQuota(t *testing.T) {
	tests := map[string]bool{"3.5.0": false, "3.5.35": false, "3.6.0": false, "3.6.5": false, "3.6.6": true, "3.6.16": true, "3.7.3": true}
	for in, want := range tests {
		if got := MustParse(in).ReportsDefaultQuota(); got != want {
			t.Errorf("%s.ReportsDefaultQuota() = %t; want %t", in, got, want)
		}
	}
}

func TestStatusNeedsRoot(t *testing.T) {
	tests := map[string]bool{"3.5.0": false, "3.5.35": false, "3.6.0": true, "3.6.11": true, "3.6.12": false, "3.6.16": false, "3.7.3": false}
	for in, want := range tests {
		if got := MustParse(in).StatusNeedsRoot(); got != want {
			t.Errorf("%s.StatusNeedsRoot() = %t; want %t", in, got, want)
		}
	}
}

func TestAuthStatusNeedsRoot(t *testing.T) {
	tests := map[string]bool{"3.5.0": true, "3.5.35": true, "3.6.16": true, "3.7.0": false, "3.7.3": false}
	for in, want := range tests {
		if got := MustParse(in).AuthStatusNeedsRoot(); got != want {
			t.Errorf("%s.AuthStatusNeedsRoot() = %t; want %t", in, got, want)
		}
	}
}

func TestUpgradeFloor(t *testing.T) {
	tests := []struct {
		target string
		floor  string // "" when none
	}{
		{"3.6.0", "3.5.26"},
		{"3.6.16", "3.5.26"},
		{"3.7.3", "3.6.11"},
		{"3.5.35", ""},
		{"3.8.0", ""},
	}
	for _, tt := range tests {
		floor, ok := UpgradeFloor(MustParse(tt.target))
		switch {
		case tt.floor == "" && ok:
			t.Errorf("UpgradeFloor(%s) = %s; want none", tt.target, floor)
		case tt.floor != "" && (!ok || floor != MustParse(tt.floor)):
			t.Errorf("UpgradeFloor(%s) = %s, %t; want %s", tt.target, floor, ok, tt.floor)
		}
	}
}

func TestMembershipIssue(t *testing.T) {
	tests := []struct {
		version string
		fixedIn string // "" when the patch has no known membership bug
	}{
		{"3.5.0", "3.5.20"},
		{"3.5.6", "3.5.20"},
		{"3.5.7", "3.5.20"},
		{"3.5.12", "3.5.20"},
		{"3.5.19", "3.5.20"},
		{"3.5.20", ""},
		{"3.5.21", ""},
		{"3.5.35", ""},
		{"3.6.0", ""},
		{"3.7.3", ""},
	}
	for _, tt := range tests {
		issue, ok := MembershipIssue(MustParse(tt.version))
		switch {
		case tt.fixedIn == "" && ok:
			t.Errorf("MembershipIssue(%s) = %s; want none", tt.version, issue)
		case tt.fixedIn != "" && (!ok || issue.FixedIn != MustParse(tt.fixedIn) || issue.What == "" || issue.Source == ""):
			t.Errorf("MembershipIssue(%s) = %+v, %t; want one fixed in %s", tt.version, issue, ok, tt.fixedIn)
		}
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("MustParse of a non-version did not panic")
		}
	}()
	MustParse("3.6")
}

func TestDowngradeRefusal(t *testing.T) {
	tests := []struct {
		from, to string
		want     string // part of the refusal; "" when etcd can do it
	}{
		{"3.6.16", "3.5.35", ""},
		{"3.6.0", "3.5.26", ""},
		{"3.7.3", "3.6.16", ""},
		{"3.7.3", "3.6.11", ""},
		{"3.6.16", "3.5.25", "3.5.26 or a newer 3.5 patch"},
		{"3.7.3", "3.6.10", "3.6.11 or a newer 3.6 patch"},
		{"3.7.3", "3.5.35", "one minor at a time"},
		{"3.5.35", "3.4.30", "no downgrade API"},
		{"4.0.0", "3.7.3", "within one major"},
	}
	for _, tt := range tests {
		got := DowngradeRefusal(MustParse(tt.from), MustParse(tt.to))
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("DowngradeRefusal(%s, %s) = %q; want %q", tt.from, tt.to, got, tt.want)
		}
	}
}

func TestDowngradeFloorAndClusterMinor(t *testing.T) {
	if f, ok := DowngradeFloor(MustParse("3.5.35")); !ok || f != MustParse("3.5.26") {
		t.Errorf("DowngradeFloor(3.5) = %s, %t; want 3.5.26", f, ok)
	}
	if f, ok := DowngradeFloor(MustParse("3.6.1")); !ok || f != MustParse("3.6.11") {
		t.Errorf("DowngradeFloor(3.6) = %s, %t; want 3.6.11", f, ok)
	}
	if _, ok := DowngradeFloor(MustParse("3.7.3")); ok {
		t.Error("DowngradeFloor(3.7) states a floor etcd does not")
	}
	if got := MustParse("3.5.35").ClusterMinor().String(); got != "3.5.0" {
		t.Errorf("ClusterMinor = %s; want 3.5.0", got)
	}
}
