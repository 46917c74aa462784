package transport

import "os"

// bootID is the kernel's boot id: it tells hosts (and reboots) apart
// where host names may repeat.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(b)
}
