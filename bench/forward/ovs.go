package forward

// Open vSwitch: a private ovsdb-server and ovs-vswitchd (in the switch
// namespace), a netdev (userspace) bridge over p1 and p2, a ptcp listener.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ovsTools are the Open vSwitch programs the ovs target runs, with their
// Debian packages.
var ovsTools = []struct{ name, pkg string }{
	{"ovsdb-tool", "openvswitch-switch"}, {"ovsdb-server", "openvswitch-switch"},
	{"ovs-vswitchd", "openvswitch-switch"}, {"ovs-vsctl", "openvswitch-switch"},
	{"ovs-ofctl", "openvswitch-common"},
}

// ovsSchema is the database schema ovsdb-tool creates the database from.
const ovsSchema = "/usr/share/openvswitch/vswitch.ovsschema"

// checkOVSTools names the Debian package of a missing Open vSwitch tool.
func checkOVSTools() error {
	for _, t := range ovsTools {
		if _, err := exec.LookPath(t.name); err != nil {
			return fmt.Errorf("%s is not installed: apt-get install %s (or leave ovs out of --targets)", t.name, t.pkg)
		}
	}
	if _, err := os.Stat(ovsSchema); err != nil {
		return fmt.Errorf("%s is missing: apt-get install openvswitch-switch (or leave ovs out of --targets)", ovsSchema)
	}
	return nil
}

func (e *fwdEnv) ovsDir(s string) string { return filepath.Join(e.dir, "ovs", s) }

// ovsEnv points the Open vSwitch tools at the private folders.
func (e *fwdEnv) ovsEnv() []string {
	return []string{"OVS_RUNDIR=" + e.ovsDir("run"), "OVS_LOGDIR=" + e.ovsDir("log"),
		"OVS_DBDIR=" + e.ovsDir("db"), "OVS_SYSCONFDIR=" + e.ovsDir("etc")}
}

// ovsCmd runs an Open vSwitch tool to completion.
func (e *fwdEnv) ovsCmd(args ...string) error {
	ctx, cancel := context.WithTimeout(e.ctx, 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), e.ovsEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (e *fwdEnv) runOVS() ([]Step, []FlowMods, error) {
	// A fresh database and run folder each time: with --rounds, the
	// previous round's (stopped) daemons left theirs behind.
	for _, d := range []string{"run", "db"} {
		if err := os.RemoveAll(e.ovsDir(d)); err != nil {
			return nil, nil, err
		}
	}
	for _, d := range []string{"run", "log", "db", "etc/openvswitch"} {
		if err := os.MkdirAll(e.ovsDir(d), 0o755); err != nil {
			return nil, nil, err
		}
	}
	db := e.ovsDir("db/conf.db")
	sock := e.ovsDir("run/db.sock")
	if err := e.ovsCmd("ovsdb-tool", "create", db, ovsSchema); err != nil {
		return nil, nil, err
	}
	dbd, err := e.start(0, "ovsdb-server", "ovsdb-server", db, "--remote=punix:"+sock,
		"--pidfile="+e.ovsDir("run/ovsdb-server.pid"), "--unixctl="+e.ovsDir("run/ovsdb-server.ctl"))
	if err != nil {
		return nil, nil, err
	}
	defer dbd.stop()
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 100 {
			return nil, nil, fmt.Errorf("ovsdb-server did not create %s within 10s: %v", sock, dbd.exited())
		}
		time.Sleep(100 * time.Millisecond)
	}
	vsctl := func(args ...string) error {
		return e.ovsCmd(append([]string{"ovs-vsctl", "--db=unix:" + sock, "--timeout=30"}, args...)...)
	}
	if err := vsctl("--no-wait", "init"); err != nil {
		return nil, nil, err
	}
	vsd, err := e.start(e.sw, "ovs-vswitchd", "ovs-vswitchd", "unix:"+sock,
		"--pidfile="+e.ovsDir("run/ovs-vswitchd.pid"), "--unixctl="+e.ovsDir("run/ovs-vswitchd.ctl"))
	if err != nil {
		return nil, nil, err
	}
	defer vsd.stop()
	port := 16000 + rand.IntN(20000)
	err = vsctl("add-br", "fbovs", "--", "set", "bridge", "fbovs", "datapath_type=netdev", "protocols=OpenFlow13",
		"fail_mode=secure", "other-config:datapath-id=0000000000000001", "other-config:disable-in-band=true",
		"--", "add-port", "fbovs", "p1", "--", "set", "interface", "p1", "ofport_request=1",
		"--", "add-port", "fbovs", "p2", "--", "set", "interface", "p2", "ofport_request=2",
		"--", "set-controller", "fbovs", fmt.Sprintf("ptcp:%d:127.0.0.1", port))
	if err != nil {
		return nil, nil, fmt.Errorf("%w (%v)", err, vsd.exited())
	}
	mgmt := "unix:" + e.ovsDir("run/fbovs.mgmt")
	ofctl := func(args ...string) error {
		return e.ovsCmd(append([]string{"ovs-ofctl", "-O", "OpenFlow13"}, args...)...)
	}
	var steps []Step
	for _, n := range e.ruleCounts() {
		file := filepath.Join(e.dir, fmt.Sprintf("rules-%d.txt", n))
		text := ruleFile(n)
		if e.rs != nil {
			var err error
			if text, err = e.rs.ovsFile(); err != nil {
				return steps, nil, fmt.Errorf("ovs: %w", err)
			}
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			return steps, nil, err
		}
		if err := ofctl("del-flows", mgmt); err != nil {
			return steps, nil, err
		}
		if err := ofctl("add-flows", mgmt, file); err != nil {
			return steps, nil, err
		}
		s, err := e.series("ovs", "", n)
		steps = append(steps, s...)
		if err != nil {
			return steps, nil, err
		}
	}
	if e.f.flowmods == 0 || e.round > 1 {
		return steps, nil, nil
	}
	if err := ofctl("del-flows", mgmt); err != nil {
		return steps, nil, err
	}
	c, err := e.dialOF(port, vsd)
	if err != nil {
		return steps, nil, fmt.Errorf("ovs: %w", err)
	}
	defer c.conn.Close()
	fm, err := e.flowModRun(c, "ovs", "")
	if err != nil {
		return steps, nil, err
	}
	return steps, []FlowMods{fm}, errors.Join(vsd.exited())
}
