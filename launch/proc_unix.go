//go:build unix

package launch

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup starts cmd in a process group of its own, so that a
// terminal's signals reach only the launcher and a rank's own children can
// be stopped with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group of p (its own, see
// setProcessGroup), falling back to p alone.
func signalGroup(p *os.Process, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return p.Signal(sig)
	}
	err := syscall.Kill(-p.Pid, s)
	if errors.Is(err, syscall.ESRCH) {
		return p.Signal(sig)
	}
	return err
}

// terminate is the polite stop signal.
var terminate os.Signal = syscall.SIGTERM

// signalNumber is the number of a signal for exit codes (128+n), 0 if
// unknown.
func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// exitSignal reports the signal that ended a process, if one did.
func exitSignal(st *os.ProcessState) (os.Signal, bool) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal(), true
	}
	return nil, false
}
