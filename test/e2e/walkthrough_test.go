package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quorumkeeper/etcd-operator/test/docs"
)

// journeyAuthNamespace is the namespace step 5 of docs/tls-journey.md creates by name.
const journeyAuthNamespace = "etcd-auth"

// docs/tls-journey.md as a reader runs it: its YAML blocks saved under their names, then every
// command of its shell blocks marked run, in order, in one bash, with kubectl (E2E_KUBECTL)
// and the kubectl etcd plugin on PATH and a kubeconfig of its own whose namespace is the
// test's (the journey switches it to etcd-auth in step 5). Each command must succeed (or
// fail, when its comment says Error:) within its own timeout, and print what a one-word
// comment says. Uses cert-manager (hack/e2e.sh installs it) and the namespace etcd-auth.
func TestTLSJourneyAsWritten(t *testing.T) {
	t.Parallel()
	w := readWalkthrough(t, "docs/tls-journey.md")
	ns := namespace(t)
	claimAuthNamespace(t)
	dir := t.TempDir()
	for name, text := range w.Files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sh := startShell(t, dir, dir, walkthroughEnv(t, dir, ns, w))
	runWalkthrough(t, "tls-journey.md", sh, w.Commands, nil)
}

// runWalkthrough runs the commands in order in sh and stops the test at the first that does
// not do what the document says; after each one that did, check (when not nil) looks at
// what it left in the cluster. doc names the document in the log.
func runWalkthrough(t *testing.T, doc string, sh *shell, cmds []docs.Command, check func(docs.Command)) {
	t.Helper()
	for _, c := range cmds {
		stdout, stderr, err := sh.run(c.Text, c.Timeout())
		t.Logf("%s:%d: %s\n%s%s", doc, c.Line, c.Text, stdout, stderr)
		if msg := judge(c, stdout, stderr, err); msg != "" {
			t.Fatalf("%s:%d: %s: %s", doc, c.Line, c.Text, msg)
		}
		if check != nil {
			check(c)
		}
	}
}

// readWalkthrough reads and parses the walkthrough at path, from the checkout's root.
func readWalkthrough(t *testing.T, path string) docs.Walkthrough {
	t.Helper()
	var w docs.Walkthrough
	doc, err := docs.Read(path)
	if err == nil {
		w, err = docs.ParseWalkthrough(doc)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return w
}

// judge is the command's verdict on a run that ended, or why the run did not end.
func judge(c docs.Command, stdout, stderr string, err error) string {
	var failed commandFailed
	if err != nil && !errors.As(err, &failed) {
		return err.Error()
	}
	return c.Verdict(stdout, stderr, err != nil)
}

// claimAuthNamespace waits until no etcd-auth namespace is left from an earlier run, and
// deletes the one this run makes when the test ends.
func claimAuthNamespace(t *testing.T) {
	t.Helper()
	key := client.ObjectKey{Name: journeyAuthNamespace}
	eventually(t, 5*time.Minute, "namespace "+journeyAuthNamespace+" from an earlier run gone", func() error {
		err := k8s.Get(context.Background(), key, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Name}})
			return errors.New("still there")
		}
		return err
	})
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Name}})
	})
}

// walkthroughEnv is the walkthrough shell's environment: a kubeconfig of its own (the journey
// changes its namespace) pointed at ns, a home directory of its own, and PATH with kubectl
// and, when a command runs it, the kubectl etcd plugin first.
func walkthroughEnv(t *testing.T, dir, ns string, w docs.Walkthrough) []string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	kubectlBin := os.Getenv("E2E_KUBECTL")
	if kubectlBin == "" {
		t.Fatal("E2E_KUBECTL is not set: run through hack/e2e.sh, which names the kubectl binary")
	}
	if err := os.Symlink(kubectlBin, filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Commands {
		if strings.Contains(c.Text, "kubectl etcd ") {
			if err := os.Symlink(buildPlugin(t), filepath.Join(bin, "kubectl-etcd")); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	return []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"KUBECONFIG=" + ownKubeconfig(t, dir, ns),
		"HOME=" + dir,
		"LANG=C.UTF-8",
	}
}

// ownKubeconfig writes a self-contained copy of $KUBECONFIG whose current context's
// namespace is ns.
func ownKubeconfig(t *testing.T, dir, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.ResolveLocalPaths(cfg); err != nil {
		t.Fatal(err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		t.Fatalf("$KUBECONFIG has no current context %q", cfg.CurrentContext)
	}
	ctx.Namespace = ns
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// shell is one bash that runs commands one at a time, as a reader's terminal does: variables
// and functions a command defines stay for the next. Each command is a file the shell
// sources, its output in files beside it, stdin empty; the shell answers with its status.
type shell struct {
	cmd     *exec.Cmd
	control io.WriteCloser
	answers *bufio.Scanner
	dir     string
	n       int
}

// shellLoop sources each file named on stdin and answers "<status>" on stdout.
// The loop's variable has a name no walkthrough uses.
const shellLoop = `while IFS= read -r __walkthrough_cmd; do
  source "$__walkthrough_cmd" >"$__walkthrough_cmd.out" 2>"$__walkthrough_cmd.err" </dev/null
  echo "$?"
done`

// startShell starts a shell in cwd that keeps its commands and their output under dir.
func startShell(t *testing.T, dir, cwd string, env []string) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-c", shellLoop)
	cmd.Dir, cmd.Env = cwd, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children die with it
	control, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &shell{cmd: cmd, control: control, answers: bufio.NewScanner(out), dir: filepath.Join(dir, "commands")}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

// commandFailed is a command that ended with a non-zero status.
type commandFailed struct{ status string }

func (f commandFailed) Error() string { return "exit status " + f.status }

// run runs one command and returns what it wrote and how it ended (commandFailed for a
// non-zero status); past timeout the shell and everything it started are killed.
func (s *shell) run(text string, timeout time.Duration) (stdout, stderr string, err error) {
	s.n++
	file := filepath.Join(s.dir, strconv.Itoa(s.n))
	if err := os.WriteFile(file, []byte(text+"\n"), 0o600); err != nil {
		return "", "", err
	}
	answer := make(chan string, 1)
	go func() {
		if s.answers.Scan() {
			answer <- s.answers.Text()
		}
		close(answer)
	}()
	if _, err := fmt.Fprintln(s.control, file); err != nil {
		return "", "", err
	}
	var status string
	var ok bool
	select {
	case status, ok = <-answer:
	case <-time.After(timeout):
		s.stop()
		return readFile(file + ".out"), readFile(file + ".err"), fmt.Errorf("no end within %s", timeout)
	}
	stdout, stderr = readFile(file+".out"), readFile(file+".err")
	if !ok {
		return stdout, stderr, errors.New("the shell ended")
	}
	if status != "0" {
		return stdout, stderr, commandFailed{status: status}
	}
	return stdout, stderr, nil
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// stop kills the shell's process group: the shell and any command still running.
func (s *shell) stop() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		_ = s.cmd.Wait()
	}
}
