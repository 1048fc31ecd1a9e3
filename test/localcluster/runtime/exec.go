package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// outputDrainTimeout bounds how long Exec keeps copying output after the command exited,
// for background children that still hold the output open.
const outputDrainTimeout = 2 * time.Second

// TerminalSize is a terminal's size in characters.
type TerminalSize struct{ Width, Height uint16 }

// ExecOptions wires an exec'd command. Nil readers and writers mean "none".
type ExecOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool                // run on a new pseudo-terminal; its output goes to Stdout
	Resize         <-chan TerminalSize // optional, TTY only
}

// Exec runs argv inside the running container: its mount namespace and root, network
// namespace, user, group, environment and working directory. It returns argv's exit code
// (128+n when killed by signal n). Cancelling ctx kills the command and its process group.
// Supplementary groups are not applied (nsenter clears them).
func Exec(ctx context.Context, c *Container, argv []string, opts ExecOptions) (exitCode int, err error) {
	if len(argv) == 0 {
		return -1, errors.New("exec: empty command")
	}
	select {
	case <-c.done:
		return -1, fmt.Errorf("exec in container %s: it is not running", c.spec.ID)
	default:
	}
	cmd := exec.CommandContext(ctx, nsenterPath, c.nsenterArgs(argv)...)
	cmd.Env = c.spec.processEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The command leads its own process group (Setpgid or Setsid below), so this kills
	// its children too.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if opts.TTY {
		if lookupEnv(cmd.Env, "TERM") == "" {
			cmd.Env = append(cmd.Env, "TERM=xterm")
		}
		exitCode, err = c.runOnTTY(cmd, opts)
	} else {
		exitCode, err = runWithPipes(cmd, opts)
	}
	if ctxErr := ctx.Err(); ctxErr != nil && err == nil {
		err = ctxErr
	}
	return exitCode, err
}

// nsenterArgs joins the namespaces and root of the container's main process; --wd takes
// its current working directory.
func (c *Container) nsenterArgs(argv []string) []string {
	args := []string{"--target", strconv.Itoa(c.Pid()), "--mount"}
	if c.spec.NetNS != "" {
		args = append(args, "--net")
	}
	if c.spec.Hostname != "" {
		args = append(args, "--uts")
	}
	args = append(args, "--root", "--wd",
		"--setuid", strconv.Itoa(c.spec.UID), "--setgid", strconv.Itoa(c.spec.GID), "--")
	return append(args, argv...)
}

func runWithPipes(cmd *exec.Cmd, opts ExecOptions) (int, error) {
	cmd.SysProcAttr.Setpgid = true
	cmd.Stdout = opts.Stdout
	cmd.Stderr = opts.Stderr
	cmd.WaitDelay = outputDrainTimeout
	stdin, err := feedStdin(cmd, opts.Stdin)
	if err != nil {
		return -1, err
	}
	defer stdin.close()
	if err := cmd.Start(); err != nil {
		return -1, err
	}
	stdin.started()
	err = cmd.Wait()
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // the command is done; a background child kept the output open
	}
	return exitCodeOf(cmd.ProcessState, err)
}

// stdinFeeder copies the caller's reader into a pipe. exec.Cmd would do that too, but its
// Wait then waits for the reader, which for an interactive stream may never end.
type stdinFeeder struct {
	reader, writer         *os.File
	readerOnce, writerOnce sync.Once
}

func feedStdin(cmd *exec.Cmd, source io.Reader) (*stdinFeeder, error) {
	if source == nil {
		return &stdinFeeder{}, nil
	}
	reader, writer, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = reader
	feeder := &stdinFeeder{reader: reader, writer: writer}
	go func() {
		_, _ = io.Copy(writer, source)
		feeder.closeWriter() // EOF for the command
	}()
	return feeder, nil
}

// started drops our copy of the command's end, so that we get EPIPE once it is gone.
func (f *stdinFeeder) started() {
	if f.reader != nil {
		f.readerOnce.Do(func() { f.reader.Close() })
	}
}

func (f *stdinFeeder) closeWriter() {
	if f.writer != nil {
		f.writerOnce.Do(func() { f.writer.Close() })
	}
}

// close ends the feeding; a copy blocked reading the caller's reader ends at its next write.
func (f *stdinFeeder) close() {
	f.started()
	f.closeWriter()
}

func (c *Container) runOnTTY(cmd *exec.Cmd, opts ExecOptions) (int, error) {
	terminal, err := openPTY(c.spec.UID)
	if err != nil {
		return -1, fmt.Errorf("exec: allocate a terminal: %w", err)
	}
	defer terminal.master.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = terminal.slave, terminal.slave, terminal.slave
	// A new session with the terminal as controlling tty: job control and ^C work.
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0
	err = cmd.Start()
	terminal.slave.Close()
	if err != nil {
		return -1, err
	}
	if opts.Stdin != nil {
		go func() { _, _ = io.Copy(terminal.master, opts.Stdin) }()
	}
	if opts.Resize != nil {
		go terminal.followResizes(opts.Resize)
	}
	outputDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(writerOrDiscard(opts.Stdout), terminal.master) // ends with EIO when the slave closes
		close(outputDone)
	}()
	err = cmd.Wait()
	select {
	case <-outputDone:
	case <-time.After(outputDrainTimeout):
	}
	return exitCodeOf(cmd.ProcessState, err)
}

func writerOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

type pty struct{ master, slave *os.File }

// openPTY allocates a pseudo-terminal whose slave belongs to uid (as login does), so the
// container's user can reopen it as /dev/tty.
func openPTY(uid int) (*pty, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	var number uint32
	err = controlFD(master, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return err
		}
		number, err = unix.IoctlGetUint32(fd, unix.TIOCGPTN)
		return err
	})
	if err != nil {
		master.Close()
		return nil, err
	}
	slavePath := "/dev/pts/" + strconv.FormatUint(uint64(number), 10)
	slave, err := os.OpenFile(slavePath, os.O_RDWR|unix.O_NOCTTY, 0)
	if err == nil {
		err = slave.Chown(uid, -1)
	}
	if err != nil {
		master.Close()
		if slave != nil {
			slave.Close()
		}
		return nil, err
	}
	return &pty{master: master, slave: slave}, nil
}

func (p *pty) followResizes(sizes <-chan TerminalSize) {
	for size := range sizes {
		err := controlFD(p.master, func(fd int) error {
			return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Height, Col: size.Width})
		})
		if err != nil {
			return // the terminal is gone
		}
	}
}

// controlFD runs fn on f's descriptor without f.Fd(), which would switch f to blocking
// mode and make Close unable to interrupt a pending Read.
func controlFD(f *os.File, fn func(fd int) error) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var fnErr error
	if err := raw.Control(func(fd uintptr) { fnErr = fn(int(fd)) }); err != nil {
		return err
	}
	return fnErr
}
