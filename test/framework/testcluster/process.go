package testcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is one component started by the cluster, logging to a file in the state folder.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	exited  chan struct{}
	waitErr error
}

func (c *Cluster) spawn(bin, name string, args ...string) (*process, error) {
	return c.spawnPath(filepath.Join(bin, name), name, args...)
}

// spawnPath starts the executable at path as component name (its log is name.log, appended to
// when the component is started again).
func (c *Cluster) spawnPath(path, name string, args ...string) (*process, error) {
	logPath := filepath.Join(c.Dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// The component dies with the process that started it, even if that one is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, log: f, exited: make(chan struct{})}
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	c.procs = append(c.procs, p)
	return p, nil
}

// stop sends SIGTERM, waits up to 10s, then SIGKILL.
func (p *process) stop() error {
	defer p.log.Close()
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return nil
}

// waitHealthy polls url until it answers 200, the process exits, or the timeout passes.
func (p *process) waitHealthy(ctx context.Context, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // self-signed loopback serving cert
	}}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before becoming healthy (%v); log tail:\n%s", p.name, p.waitErr, Tail(p.logPath, 30))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy at %s after %s; log tail:\n%s", p.name, url, timeout, Tail(p.logPath, 30))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// FreePort returns a TCP port free on 127.0.0.1 at the time of the call.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// kwokStages concatenates the Stage manifests hack/build-tools.sh copied into bin/kwok-stages.
func kwokStages(bin, dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(bin, "kwok-stages", "*.yaml"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no kwok stages in %s/kwok-stages: run `make cluster-tools`", bin)
	}
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		b.WriteString("---\n")
		b.Write(data)
		b.WriteString("\n")
	}
	path := filepath.Join(dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// Tail returns the last n lines of a file.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
