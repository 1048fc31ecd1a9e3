package snapshot

import (
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1 "github.com/quorumkeeper/etcd-operator/api/v1alpha2"
	"github.com/quorumkeeper/etcd-operator/internal/plugin/cli"
)

// barWidth is the width of the progress bar, in cells.
const barWidth = 30

// bar draws percent (0 to 100) in width cells.
func bar(percent int32, width int) string {
	filled := int(min(max(percent, 0), 100)) * width / 100
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", width-filled) + "]"
}

// progressText says where the snapshot is: its phase and, once its agent reports, how much
// of the expected size is written and read back.
func progressText(s *etcdv1.EtcdSnapshot) string {
	p := s.Status.Progress
	if s.Status.Phase != etcdv1.SnapshotStarted || p == nil {
		phase := string(s.Status.Phase)
		if phase == "" {
			phase = string(etcdv1.SnapshotPending)
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, etcdv1.SnapshotConditionReady); c != nil && s.Status.Phase != etcdv1.SnapshotComplete {
			return phase + ": " + c.Message
		}
		return phase
	}
	text := fmt.Sprintf("%3d%% %s of %s written", p.Percent, cli.HumanBytes(p.BytesWritten), cli.HumanBytes(p.BytesExpected))
	if p.BytesVerified > 0 {
		text += ", " + cli.HumanBytes(p.BytesVerified) + " read back"
	}
	return text
}

// progressView shows the snapshot's progress while the command waits: on a terminal one bar
// redrawn in place, elsewhere (a log, a CI job) a line each time the text changes.
type progressView struct {
	w    io.Writer
	tty  bool
	last string
}

func newProgressView(w io.Writer) *progressView {
	return &progressView{w: w, tty: isTerminal(w)}
}

// show draws s's progress.
func (v *progressView) show(s *etcdv1.EtcdSnapshot) {
	text := progressText(s)
	if text == v.last {
		return
	}
	v.last = text
	if !v.tty {
		cli.Say(v.w, "%s\n", text)
		return
	}
	var percent int32
	if p := s.Status.Progress; p != nil {
		percent = p.Percent
	}
	// \r back to the line's start, \x1b[K clears what a longer text left.
	cli.Say(v.w, "\r%s %s\x1b[K", bar(percent, barWidth), text)
}

// end finishes the bar's line on a terminal.
func (v *progressView) end() {
	if v.tty && v.last != "" {
		cli.Say(v.w, "\n")
	}
}

// isTerminal says whether w is a terminal: a character device, not a file or a pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
