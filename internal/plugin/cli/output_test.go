package cli

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
)

func TestHumanBytes(t *testing.T) {
	for in, want := range map[int64]string{0: "0 B", 1023: "1023 B", 20480: "20.0 KiB", 3 << 20: "3.0 MiB"} {
		if got := HumanBytes(in); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

// Every -o format of a command that prints objects, from one Printout.
func TestPrintEveryOutputFormat(t *testing.T) {
	type row struct {
		Name string `json:"name"`
	}
	p := Printout{Value: []row{{"db-1"}}, Names: Named(ResourceEtcdMember, "db-1"), Table: func(w *tabwriter.Writer, wide bool) {
		Row(w, "NAME\n")
		if wide {
			Row(w, "WIDE\n")
		}
	}}
	for _, tc := range []struct{ output, want string }{
		{"", "NAME\n"},
		{"table", "NAME\n"},
		{"wide", "NAME\nWIDE\n"},
		{"json", "[\n  {\n    \"name\": \"db-1\"\n  }\n]\n"},
		{"yaml", "- name: db-1\n"},
		{"name", "etcdmember.etcd-operator.cozystack.io/db-1\n"},
	} {
		var out bytes.Buffer
		o := &Options{Output: tc.output, Out: &out}
		if err := o.checkOutput(); err != nil {
			t.Errorf("-o %q refused: %v", tc.output, err)
		}
		if err := o.Print(p); err != nil || out.String() != tc.want {
			t.Errorf("-o %q printed %q (%v), want %q", tc.output, out.String(), err, tc.want)
		}
	}
	if err := (&Options{Output: "xml"}).checkOutput(); err == nil || !strings.Contains(err.Error(), "table, wide, json, yaml, name") {
		t.Errorf("-o xml: %v; want a refusal naming the formats", err)
	}
	var out bytes.Buffer
	p.Names = nil
	if err := (&Options{Output: "name", Out: &out}).Print(p); err == nil || out.Len() != 0 {
		t.Errorf("-o name without names: printed %q, %v; want a refusal", out.String(), err)
	}
	p.Names = Named(ResourceEtcdMember)
	if err := (&Options{Output: "name", Out: &out}).Print(p); err != nil || out.Len() != 0 {
		t.Errorf("-o name of no objects: printed %q, %v; want nothing", out.String(), err)
	}
}
