package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdp5g/xdp5g/internal/api"
	"github.com/xdp5g/xdp5g/internal/demo"
	"github.com/xdp5g/xdp5g/internal/demo/demotest"
	"github.com/xdp5g/xdp5g/internal/lab/pfcptest"
	"github.com/xdp5g/xdp5g/internal/platform/namespace"
	"github.com/xdp5g/xdp5g/internal/testsupport"
)

// imageEnv names the image the container test runs; `make test` builds it
// with `make image` and sets it where podman can run containers.
const imageEnv = "XDP5G_IMAGE"

// The N4 link between the SMF's namespace and the UPF's, which the REST
// API shares.
var (
	smfN4 = netip.MustParseAddr("10.100.4.1")
	upfN4 = netip.MustParseAddr("10.100.4.2")
)

// The capabilities the image runs with, and nothing else: see "Containers"
// in docs/operations.md for why each.
const imageCaps = "CAP_BPF,CAP_NET_ADMIN,CAP_PERFMON,CAP_NET_RAW"

// The image, not the binary: the UPF runs in a container that joins the
// testbed's UPF namespace, with the fewest capabilities, a read-only root,
// seccomp on and the host's bpffs mounted. An SMF in a namespace of its own
// reaches it over an N4 link and establishes a session whose packets cross
// the data path both ways; /healthz, /readyz and /metrics answer over the
// same link. Stopped, the container leaves the data path forwarding;
// restarted, it takes over without losing a packet; `detach` run from the
// image takes the data path away.
func TestImage(t *testing.T) {
	image := os.Getenv(imageEnv)
	if image == "" {
		t.Skipf("%s names no image: `make test` builds one with `make image` and sets it where podman can run containers", imageEnv)
	}
	testsupport.NeedRoot(t, "network namespaces, XDP and containers")
	mountHostBPFFS(t)
	tb := demotest.Testbed(t)
	smfNS := testsupport.Netns(t, "xdp5g-smf")
	if err := namespace.Veth(smfNS, "n4", tb.UPF, "n4"); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(smfNS.AddAddr("n4", smfN4.String()+"/24"), tb.UPF.AddAddr("n4", upfN4.String()+"/24")); err != nil {
		t.Fatal(err)
	}

	c := newContainer(t, image, tb.UPF)
	client := &api.Client{URL: "http://" + netip.AddrPortFrom(upfN4, 9880).String(), HTTP: httpIn(smfNS), Token: c.token}
	c.awaitReady(t, client)
	probes(t, client)
	scrape := func() []string { return metrics(t, client) }
	testsupport.HasLines(t, scrape(), "xdp5g_upf_sessions 0", "xdp5g_upf_sessions_max 64")

	if _, err := client.Create(t.Context(), []byte(sessionDocument)); err != nil {
		t.Fatal(err)
	}
	var smf *pfcptest.SMF
	if err := smfNS.Do(func() (err error) {
		smf, err = pfcptest.NewSMF(smfNodeID, netip.AddrPortFrom(upfN4, 8805))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { smf.Close() })
	if _, err := smf.Associate(); err != nil {
		t.Fatal(err)
	}
	const cpSEID = 0x1a9e
	sess, err := smf.EstablishPDUSession(cpSEID, demo.GNBAddr, demo.DownlinkTEID, demo.QFI)
	if err != nil {
		t.Fatal(err)
	}
	pfcpUp, pfcpDown := sessionFrames(tb, sess.TEID, sess.UE)
	restUp, restDown := sessionFrames(tb, demo.UplinkTEID, demo.UEAddr)
	delivered(t, tb, "the SMF's session", pfcpUp, pfcpDown)
	delivered(t, tb, "the REST session", restUp, restDown)
	before := scrape()
	testsupport.HasLines(t, before, "xdp5g_upf_sessions 2",
		`xdp5g_pfcp_association_state{node_id="`+smfNodeID+`",state="up"} 1`,
		`xdp5g_pfcp_responses_sent_total{cause="request_accepted",message_type="session_establishment_response"} 1`)
	uplinkForwarded := `xdp5g_upf_packets_total{interface="n3",reason="uplink_forward"}`
	if v, _ := testsupport.Value(before, uplinkForwarded); v != 2*pfcpPackets {
		t.Errorf("%s %g, want %d", uplinkForwarded, v, 2*pfcpPackets)
	}
	recovery := recoveryTime(t, smf)

	c.podman(t, "stop", c.name)
	for _, link := range []string{demo.N3, demo.N6} {
		if !testsupport.XDPAttached(t, tb.UPF, link) {
			t.Errorf("%s lost its XDP program when the container stopped", link)
		}
	}
	delivered(t, tb, "the SMF's session while the container is stopped", pfcpUp, pfcpDown)
	delivered(t, tb, "the REST session while the container is stopped", restUp, restDown)

	began := time.Now()
	c.podman(t, "start", c.name)
	c.awaitReady(t, client)
	t.Logf("the container started again and was ready in %v", time.Since(began))
	traffic := startFlows(t, tb)
	began = time.Now()
	c.podman(t, "restart", c.name)
	c.awaitReady(t, client)
	t.Logf("the container restarted and was ready in %v", time.Since(began))
	traffic.lossless(t, "while the container restarted")

	// An SMF that sees a later Recovery Time Stamp establishes its
	// session again, on the TEID and UE address it had.
	if recoveryTime(t, smf).After(recovery) {
		establishAgain(t, smf, cpSEID, sess, "after the restart")
	}
	delivered(t, tb, "the SMF's session after the restart", pfcpUp, pfcpDown)
	// The data path's counters live in its pinned maps: they went on
	// while the container was stopped.
	after := scrape()
	testsupport.HasLines(t, after, "xdp5g_upf_sessions 2")
	was, _ := testsupport.Value(before, uplinkForwarded)
	if now, _ := testsupport.Value(after, uplinkForwarded); now < was+2*pfcpPackets {
		t.Errorf("%s %g after the restart, %g before; want at least the %d packets sent while it was stopped more",
			uplinkForwarded, now, was, 2*pfcpPackets)
	}

	c.podman(t, "stop", c.name)
	c.podman(t, append(append([]string{"run", "--rm"}, c.runArgs...), image, "detach", "--config", "/etc/xdp5g/xdp5g.yaml")...)
	for _, link := range []string{demo.N3, demo.N6} {
		if testsupport.XDPAttached(t, tb.UPF, link) {
			t.Errorf("%s keeps its XDP program after detach", link)
		}
	}
}

// The image holds the product's binary and the CA certificates, nothing
// else (no lab binary, no shell); it runs as root, the daemon by default,
// and its binary says the version the image is labelled with.
func TestImageContents(t *testing.T) {
	image := os.Getenv(imageEnv)
	if image == "" {
		t.Skipf("%s names no image", imageEnv)
	}
	testsupport.NeedRoot(t, "podman")
	out, err := podmanCommand("image", "inspect", "--format",
		`{{index .Labels "org.opencontainers.image.version"}}|{{.Config.User}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}`, image).Output()
	if err != nil {
		t.Fatalf("podman image inspect: %v", err)
	}
	const runs = `|["/usr/bin/xdp5g"]|["run","--config","/etc/xdp5g/xdp5g.yaml"]`
	version, rest, _ := strings.Cut(strings.TrimSpace(string(out)), "|")
	if version == "" || version == "unknown" || rest != runs {
		t.Errorf("the image is %s|%s; want a version, then %s (root, the daemon)", version, rest, runs)
	}
	if out, err := podmanCommand("run", "--rm", "--network", "none", image, "--version").CombinedOutput(); err != nil ||
		string(out) != "xdp5g version "+version+"\n" {
		t.Errorf("xdp5g --version in the image: %v, %q; want version %s", err, out, version)
	}

	mounted, err := podmanCommand("image", "mount", image).Output()
	if err != nil {
		t.Fatalf("podman image mount: %v", err)
	}
	t.Cleanup(func() { podmanCommand("image", "unmount", image).Run() })
	root := strings.TrimSpace(string(mounted))
	var files []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, strings.TrimPrefix(path, root))
		}
		return err
	})
	if want := []string{"/etc/ssl/certs/ca-certificates.crt", "/usr/bin/xdp5g"}; err != nil || !slices.Equal(files, want) {
		t.Errorf("the image holds %v (%v); want %v", files, err, want)
	}
	binary, err := os.ReadFile(filepath.Join(root, "usr/bin/xdp5g"))
	if err != nil || bytes.Contains(binary, []byte("xdp5g/internal/lab")) {
		t.Errorf("the image's binary: %v, or it links the lab", err)
	}
}

// container is the UPF's container, its configuration and state in
// directories of the test's own.
type container struct {
	name    string
	runArgs []string // podman run's options but the name
	token   string
}

func newContainer(t *testing.T, image string, upf *namespace.Netns) *container {
	t.Helper()
	c := &container{name: namespace.UniqueName("xdp5g-test-")}
	dir := t.TempDir()
	etc, state := filepath.Join(dir, "etc"), filepath.Join(dir, "state")
	for _, d := range []string{etc, state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	c.token = rand.Text()
	config := fmt.Sprintf(`interfaces:
  - {name: %s, roles: [access]}
  - {name: %s, roles: [core]}
n3_addresses: [%[3]s]
api: {listen: "%[4]s:9880", token_file: /etc/xdp5g/token}
datapath: {pin_path: %[5]s, max_sessions: 64}
state_file: /var/lib/xdp5g/sessions.json
pfcp: {node_id: %[4]s, listen: "%[4]s:8805", allowed_peers: [%[6]s/32], heartbeat_interval: 1h, ue_pool: %[7]s}
`, demo.N3, demo.N6, demo.N3Addr, upfN4, testsupport.PinDir(t), smfN4, restartPool)
	for name, content := range map[string]string{"xdp5g.yaml": config, "token": c.token + "\n"} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.runArgs = []string{"--network", "ns:/run/netns/" + upf.Name,
		"--cap-drop", "ALL", "--cap-add", imageCaps, "--security-opt", "seccomp=" + seccompProfile(t, dir),
		"--read-only", "-v", "/sys/fs/bpf:/sys/fs/bpf", "-v", etc + ":/etc/xdp5g:ro", "-v", state + ":/var/lib/xdp5g"}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := podmanCommand("logs", c.name).CombinedOutput()
			t.Logf("the container's log:\n%s", out)
		}
		podmanCommand("rm", "--force", "--time", "0", c.name).Run()
	})
	c.podman(t, append(append([]string{"run", "--detach", "--name", c.name}, c.runArgs...), image)...)
	return c
}

// podman runs podman, failing the test if it fails.
func (c *container) podman(t *testing.T, args ...string) {
	t.Helper()
	if out, err := podmanCommand(args...).CombinedOutput(); err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// podmanCommand is podman as this kind of machine runs it: with the
// settings of deploy/podman/containers.conf unless CONTAINERS_CONF names
// others.
func podmanCommand(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", args...)
	if os.Getenv("CONTAINERS_CONF") == "" {
		conf, _ := filepath.Abs("../../../deploy/podman/containers.conf")
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	}
	return cmd
}

// awaitReady waits until the daemon in the container answers /readyz,
// failing the test if the container stops first.
func (c *container) awaitReady(t *testing.T, client *api.Client) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); client.Ready(t.Context()) != nil; time.Sleep(50 * time.Millisecond) {
		running, err := podmanCommand("inspect", "--format", "{{.State.Running}}", c.name).Output()
		if err != nil || strings.TrimSpace(string(running)) != "true" {
			t.Fatalf("the container stopped before it was ready: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container was not ready in 30 s: %v", client.Ready(t.Context()))
		}
	}
}

// probes checks what Kubernetes' probes and Prometheus ask of the API:
// /healthz and /readyz without the token, /metrics only with it.
func probes(t *testing.T, client *api.Client) {
	t.Helper()
	for _, c := range []struct {
		path  string
		token bool
		want  int
	}{
		{path: "/healthz", want: http.StatusOK},
		{path: "/readyz", want: http.StatusOK},
		{path: "/metrics", want: http.StatusUnauthorized},
		{path: "/metrics", token: true, want: http.StatusOK},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, client.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.token {
			req.Header.Set("Authorization", "Bearer "+client.Token)
		}
		resp, err := client.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s (token %v): %s, want %d", c.path, c.token, resp.Status, c.want)
		}
	}
}

// metrics scrapes the daemon's /metrics with the token, a line each.
func metrics(t *testing.T, client *api.Client) []string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, client.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+client.Token)
	resp, err := client.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s %v\n%s", resp.Status, err, body)
	}
	return strings.Split(string(body), "\n")
}

// httpIn is an HTTP client whose connections start in a namespace.
func httpIn(ns *namespace.Netns) *http.Client {
	dial := func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
		err = ns.Do(func() (err error) {
			conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial}}
}

// mountHostBPFFS mounts bpffs at /sys/fs/bpf unless the host has one there,
// as a host running the image must: the container mounts it.
func mountHostBPFFS(t *testing.T) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &st); err == nil && uint32(st.Type) == unix.BPF_FS_MAGIC {
		return
	}
	if err := unix.Mount("bpf", "/sys/fs/bpf", "bpf", 0, ""); err != nil {
		t.Fatal(err)
	}
}

// seccompProfile writes into dir podman's default seccomp profile with
// bpf(2) allowed to a process with CAP_BPF, as Docker's and containerd's
// default profiles allow it, and returns its path: the profile of Debian
// 12's podman allows bpf(2) only with CAP_SYS_ADMIN.
func seccompProfile(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile("/usr/share/containers/seccomp.json")
	if err != nil {
		t.Fatal(err)
	}
	var profile map[string]any
	if err := json.Unmarshal(data, &profile); err != nil {
		t.Fatal(err)
	}
	var rules []any
	for _, r := range profile["syscalls"].([]any) {
		rule := r.(map[string]any)
		var names []any
		for _, n := range rule["names"].([]any) {
			if n != "bpf" {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			rule["names"] = names
			rules = append(rules, rule)
		}
	}
	profile["syscalls"] = append(rules, map[string]any{"names": []string{"bpf"}, "action": "SCMP_ACT_ALLOW",
		"includes": map[string]any{"caps": []string{"CAP_BPF"}}})
	if data, err = json.Marshal(profile); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "seccomp.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
