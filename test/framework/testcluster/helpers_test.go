package testcluster_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processAlive reports whether pid names a live process (zombies count as ended).
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state is the first field after the ")" that closes the command name.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func statDir(dir string) (os.FileInfo, error) { return os.Stat(dir) }
