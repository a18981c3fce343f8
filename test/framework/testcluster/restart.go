package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// RestartAPIServer stops kube-apiserver (SIGTERM, as a control-plane upgrade does), keeps it down
// for downtime, and starts it again with the same arguments: the same port, serving
// certificates, service-account keys and etcd data, so every client's credentials stay valid.
// It returns once /readyz answers. etcd keeps running throughout.
func (c *Cluster) RestartAPIServer(ctx context.Context, downtime time.Duration) error {
	if c.env == nil {
		return fmt.Errorf("cluster is stopped")
	}
	srv := c.env.ControlPlane.APIServer
	port := srv.SecureServing.Port
	pid, argv, err := c.apiServerProcess(srv.CertDir)
	if err != nil {
		return err
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := proc.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("stop kube-apiserver (pid %d): %w", pid, err)
	}
	if c.apiserver != nil {
		<-c.apiserver.exited
	}
	// Down when the port refuses connections (the process has closed its listener).
	if err := waitFor(ctx, time.Minute, func() bool {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 200*time.Millisecond)
		if err == nil {
			conn.Close()
		}
		return err != nil
	}); err != nil {
		return fmt.Errorf("kube-apiserver still listening on %s: %w", port, err)
	}
	select {
	case <-time.After(downtime):
	case <-ctx.Done():
		return ctx.Err()
	}
	p, err := c.spawnPath(argv[0], "kube-apiserver", argv[1:]...)
	if err != nil {
		return err
	}
	if c.apiserver != nil {
		c.dropProc(c.apiserver)
	}
	c.apiserver = p
	return p.waitHealthy(ctx, fmt.Sprintf("https://127.0.0.1:%s/readyz", port), 2*time.Minute)
}

// apiServerProcess finds the running kube-apiserver of this cluster: the one RestartAPIServer
// started, or envtest's, recognised by its --cert-dir.
func (c *Cluster) apiServerProcess(certDir string) (int, []string, error) {
	if c.apiserver != nil {
		return c.apiserver.cmd.Process.Pid, c.apiserver.cmd.Args, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		if filepath.Base(argv[0]) != "kube-apiserver" {
			continue
		}
		for _, a := range argv[1:] {
			if a == "--cert-dir="+certDir {
				exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
				if err != nil {
					return 0, nil, err
				}
				argv[0] = exe
				return pid, argv, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("no kube-apiserver process with --cert-dir=%s", certDir)
}

func (c *Cluster) dropProc(p *process) {
	for i, q := range c.procs {
		if q == p {
			c.procs = append(c.procs[:i], c.procs[i+1:]...)
			_ = p.log.Close()
			return
		}
	}
}

func waitFor(ctx context.Context, timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
