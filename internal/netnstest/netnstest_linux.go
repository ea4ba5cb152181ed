package netnstest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// runChild runs the test binary again, for the test named by want
// ("name=mtu"), in a new network namespace; it skips t if none can be made.
func runChild(t *testing.T, want string) (string, error) {
	name := want[:bytes.LastIndexByte([]byte(want), '=')]
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary to run in a network namespace: %v", err)
	}
	attrs := []*syscall.SysProcAttr{{Cloneflags: syscall.CLONE_NEWNET}}
	if os.Geteuid() != 0 {
		// A user namespace gives the child CAP_NET_ADMIN over its own
		// network namespace, where the system allows it.
		attrs = append(attrs, &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		})
	}
	var startErr error
	for _, attr := range attrs {
		cmd := exec.Command(exe, "-test.run="+runPattern(name), "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), envVar+"="+want)
		cmd.SysProcAttr = attr
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			startErr = err
			continue
		}
		err := cmd.Wait()
		if err == nil && !bytes.Contains(out.Bytes(), []byte("--- PASS: "+name)) {
			err = errors.New("the child did not report the test as passed")
		}
		return out.String(), err
	}
	t.Skipf("cannot make a network namespace (it needs root, CAP_SYS_ADMIN, or unprivileged user namespaces): %v", startErr)
	return "", nil
}

// loopbackUp sets the loopback interface's MTU and brings it up.
func loopbackUp(mtu int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint32(uint32(mtu))
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr); err != nil {
		return fmt.Errorf("SIOCSIFMTU: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS: %w", err)
	}
	return nil
}
