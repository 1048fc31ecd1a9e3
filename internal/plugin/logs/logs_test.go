package logs

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// fakeLogs serves each member's log from a string; a member absent has no Pod.
func fakeLogs(logs map[string]string) Opener {
	return func(_ context.Context, pod string, _ *corev1.PodLogOptions) (io.ReadCloser, error) {
		text, ok := logs[pod]
		if !ok {
			return nil, errors.New(`pods "` + pod + `" not found`)
		}
		return io.NopCloser(strings.NewReader(text)), nil
	}
}

func TestPrintPrefixesEachLineWithItsMemberWhenSeveral(t *testing.T) {
	logs := map[string]string{"db-1": "a1\na2\n", "db-2": "b1\nb2 no newline at the end"}
	for _, tc := range []struct {
		name    string
		members []string
		follow  bool
		want    []string
		ordered bool
	}{
		{"one member as it is", []string{"db-1"}, false, []string{"a1", "a2"}, true},
		{"several, one after the other", []string{"db-1", "db-2"}, false, []string{"[db-1] a1", "[db-1] a2", "[db-2] b1", "[db-2] b2 no newline at the end"}, true},
		{"several followed at once", []string{"db-1", "db-2"}, true, []string{"[db-1] a1", "[db-1] a2", "[db-2] b1", "[db-2] b2 no newline at the end"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut strings.Builder
			if err := Print(context.Background(), &out, &errOut, fakeLogs(logs), tc.members, &corev1.PodLogOptions{Follow: tc.follow}); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if !tc.ordered {
				slices.Sort(got)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("printed %q, want %q", got, tc.want)
			}
		})
	}
}

// A member whose log cannot be read is named on stderr; the others are still printed, and the
// command fails.
func TestPrintGoesOnPastAMemberWithoutLog(t *testing.T) {
	var out, errOut strings.Builder
	err := Print(context.Background(), &out, &errOut, fakeLogs(map[string]string{"db-2": "b1\n"}), []string{"db-1", "db-2"}, &corev1.PodLogOptions{})
	if err == nil || !strings.Contains(err.Error(), "1 of 2 members") || !strings.Contains(errOut.String(), `db-1: pods "db-1" not found`) || out.String() != "[db-2] b1\n" {
		t.Errorf("err %v, stderr %q, stdout %q", err, errOut.String(), out.String())
	}
}

func TestFlagsAskForTheEtcdContainer(t *testing.T) {
	all := (&flags{tail: -1}).options()
	if all.Container != "etcd" || all.TailLines != nil || all.SinceSeconds != nil || all.Previous || all.Follow {
		t.Errorf("default options %+v", all)
	}
	some := (&flags{tail: 20, since: 10 * time.Minute, previous: true, follow: true, timestamps: true}).options()
	if *some.TailLines != 20 || *some.SinceSeconds != 600 || !some.Previous || !some.Follow || !some.Timestamps {
		t.Errorf("options %+v", some)
	}
}
