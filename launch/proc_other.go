//go:build !unix

package launch

import (
	"os"
	"os/exec"
)

func setProcessGroup(cmd *exec.Cmd) {}

func signalGroup(p *os.Process, sig os.Signal) error {
	if sig == os.Interrupt || sig == terminate {
		return p.Kill() // Windows cannot deliver either
	}
	return p.Signal(sig)
}

var terminate os.Signal = os.Kill

func signalNumber(sig os.Signal) int { return 0 }

func exitSignal(st *os.ProcessState) (os.Signal, bool) { return nil, false }
