// Package deploytest checks what xdp5g ships beside its binary: the Helm
// chart, rendered and decoded as Kubernetes would take it, the Grafana
// dashboard against a running daemon's metrics, and the systemd unit.
package deploytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/xdp5g/xdp5g/internal/config"
)

// helm is Helm as the Go module proxy serves it, pinned.
const helm = "helm.sh/helm/v3/cmd/helm@v3.22.0"

const chart = "../../../deploy/helm/xdp5g"

// The capabilities the daemon needs (docs/operations.md, "Containers"),
// and with a CU-UP on AF_XDP, CAP_IPC_LOCK for its UMEMs.
var (
	capabilities = []corev1.Capability{"BPF", "PERFMON", "NET_ADMIN", "NET_RAW"}
	withAFXDP    = append(slices.Clone(capabilities), "IPC_LOCK")
)

// networkAttachmentDefinition is Multus's k8s.cni.cncf.io/v1 type, whose
// Go module the proxy does not serve: a CNI configuration as JSON.
type networkAttachmentDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Config string `json:"config"`
	} `json:"spec"`
}

// rendered are the objects a values file renders, by kind.
type rendered struct {
	configMaps   []corev1.ConfigMap
	secrets      []corev1.Secret
	services     []corev1.Service
	daemonSets   []appsv1.DaemonSet
	deployments  []appsv1.Deployment
	monitors     []monitoringv1.ServiceMonitor
	attachments  []networkAttachmentDefinition
	podTemplates []corev1.PodTemplateSpec
}

// Every values file of the chart lints, renders, and renders objects that
// decode strictly into the Kubernetes API's Go types (an unknown or
// misspelt field fails), and that fit together: each node's configuration
// loads with the daemon's own loader and has a pod, the pods mount what
// the configuration names, probe the API's port, run with the daemon's
// capabilities only and the host's bpffs, and attach the networks the
// chart defines; the ServiceMonitor scrapes the Service with the token.
func TestChart(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(chart, "ci", "*-values.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("values files %v, %v: want the UPF's, the classifier's and the CU-UP's", files, err)
	}
	for _, values := range files {
		t.Run(strings.TrimSuffix(filepath.Base(values), "-values.yaml"), func(t *testing.T) {
			runHelm(t, "lint", "--strict", chart, "-f", values)
			r := decodeAll(t, runHelm(t, "template", "xdp5g", chart, "-f", values, "--namespace", "upf"))
			checkRendered(t, r)
		})
	}
	// HTTPS, another N4 port and another API port, this one given by each
	// node, reach the probes, the Service and the ServiceMonitor, which
	// checks the certificate.
	t.Run("https", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "https-values.yaml")
		https := "apiTLS: {existingSecret: upf-api-tls}\nconfig: {pfcp: {listen: \":8806\"}}\nnodes:\n"
		for _, node := range []string{"upf-a:11", "upf-b:12", "upf-c:13"} {
			name, host, _ := strings.Cut(node, ":")
			https += fmt.Sprintf("  %s: {config: {pfcp: {listen: \"10.10.4.%s:8806\"}, api: {listen: \"10.10.4.%[2]s:9443\"}}}\n", name, host)
		}
		if err := os.WriteFile(values, []byte(https), 0o600); err != nil {
			t.Fatal(err)
		}
		r := decodeAll(t, runHelm(t, "template", "xdp5g", chart, "-f", filepath.Join(chart, "ci", "upf-values.yaml"), "-f", values))
		checkRendered(t, r)
		if ep := r.monitors[0].Spec.Endpoints[0]; ep.TLSConfig == nil || ep.TLSConfig.CA.Secret == nil ||
			ep.TLSConfig.CA.Secret.Name != "upf-api-tls" || ep.TLSConfig.ServerName == nil {
			t.Errorf("ServiceMonitor's TLS %+v; want the CA of Secret upf-api-tls and the Service's name", ep.TLSConfig)
		}
	})
	for _, tc := range []struct{ name, values, set, refusal string }{
		{"N4 ports that differ", "upf", "nodes.upf-a.config.pfcp.listen=10.10.4.11:8806", "pfcp.listen: the nodes listen on ports"},
		{"API ports that differ", "upf", "nodes.upf-a.config.api.listen=10.10.4.11:9443", "api.listen: the nodes listen on ports"},
		{"the API on the loopback", "upf", "config.api.listen=127.0.0.1:9880", "api.listen: 127.0.0.1:9880 on upf-a is a loopback address"},
		{"a node's API on the loopback", "upf", "nodes.upf-b.config.api.listen=[::1]:9880", "api.listen: [::1]:9880 on upf-b is a loopback address"},
		{"netns without CAP_SYS_ADMIN", "upf", "nodes.upf-c.config.netns=upf", "config.netns: the daemon enters the namespace with CAP_SYS_ADMIN"},
		{"a state file the pod does not mount", "upf", "config.state_file=/data/sessions.json",
			"config.state_file: /data/sessions.json is not under /var/lib/xdp5g/"},
		{"a node's PFCP state the pod does not mount", "upf", "nodes.upf-a.config.pfcp.state_dir=/var/lib/pfcp",
			"config.pfcp.state_dir: /var/lib/pfcp is not under /var/lib/xdp5g/"},
		{"a rules file the pod does not mount", "upf-classify", "config.classify.rules_file=/rules.json",
			"config.classify.rules_file: /rules.json is not under /var/lib/xdp5g/"},
		{"pins off the host's bpffs", "upf", "config.datapath.pin_path=/run/xdp5g/bpf/xdp5g",
			"config.datapath.pin_path: /run/xdp5g/bpf/xdp5g is not under /sys/fs/bpf/"},
		{"a short token", "upf", "apiToken.token=fifteen-chars-x", "apiToken.token: 15 characters; the daemon takes a token of 16 at least"},
		{"a token of two words", "upf", "apiToken.token=two words of the token", "apiToken.token: a token is one word, without spaces"},
		{"api.tls in config", "upf", "config.api.tls.cert_file=/etc/xdp5g/tls.crt", "config.api.tls: name a TLS Secret in apiTLS.existingSecret"},
		{"an address on no network", "upf-classify", "nodes.edge-1.addresses.n9[0]=10.20.9.11/24",
			"nodes.edge-1.addresses.n9: multus.networks has no network n9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command("go", "run", helm, "template", "xdp5g", chart,
				"-f", filepath.Join(chart, "ci", tc.values+"-values.yaml"), "--set", tc.set).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.refusal) {
				t.Errorf("rendered with %s: %v\n%s; want %q", tc.set, err, out, tc.refusal)
			}
		})
	}
	// A network namespace: the pod mounts the host's and may enter it.
	t.Run("netns", func(t *testing.T) {
		r := decodeAll(t, runHelm(t, "template", "xdp5g", chart, "-f", filepath.Join(chart, "ci", "upf-values.yaml"),
			"--set", "nodes.upf-b.config.netns=upf", "--set", `capabilities={BPF,PERFMON,NET_ADMIN,NET_RAW,SYS_ADMIN}`))
		checkRendered(t, r)
	})
	t.Run("without nodes", func(t *testing.T) {
		out, err := exec.Command("go", "run", helm, "template", "xdp5g", chart).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "nodes: name the nodes that run xdp5g") {
			t.Errorf("rendered without nodes: %v\n%s", err, out)
		}
	})
}

// The chart runs the image it was released with: its appVersion, a
// version rather than a moving tag such as latest, unless image.tag says
// otherwise.
func TestImagePinned(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^v?\d+\.\d+\.\d+`).MatchString(meta.AppVersion) {
		t.Errorf("Chart.yaml's appVersion %q; want the version the chart is released with", meta.AppVersion)
	}
	upf := filepath.Join(chart, "ci", "upf-values.yaml")
	for tag, want := range map[string]string{"": "localhost/xdp5g:" + meta.AppVersion, "1.0": "localhost/xdp5g:1.0"} {
		r := decodeAll(t, runHelm(t, "template", "xdp5g", chart, "-f", upf, "--set-string", "image.tag="+tag))
		if len(r.daemonSets) != 1 {
			t.Fatalf("%d DaemonSets, want 1", len(r.daemonSets))
		}
		if image := r.daemonSets[0].Spec.Template.Spec.Containers[0].Image; image != want {
			t.Errorf("image.tag %q runs %s, want %s", tag, image, want)
		}
	}
}

// A misspelt field fails the decoding.
func TestStrictDecoding(t *testing.T) {
	doc := "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers: [{name: x, securityContxt: {}}]\n"
	var r rendered
	if err := decode(doc, &r); err == nil || !strings.Contains(err.Error(), "securityContxt") {
		t.Errorf("a misspelt field: %v; want an error naming it", err)
	}
}

func runHelm(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", append([]string{"run", helm}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, &stdout, &stderr)
	}
	return stdout.String()
}

var separator = regexp.MustCompile(`(?m)^---$`)

func decodeAll(t *testing.T, manifests string) *rendered {
	t.Helper()
	r := &rendered{}
	for _, doc := range separator.Split(manifests, -1) {
		if strings.TrimSpace(strings.TrimPrefix(doc, "\n")) == "" {
			continue
		}
		if err := decode(doc, r); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
	}
	return r
}

// decode decodes one YAML document strictly into the Go type of its kind
// and adds it to r.
func decode(doc string, r *rendered) error {
	data, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		return err
	}
	var meta metav1.TypeMeta
	if err := json.Unmarshal(data, &meta); err != nil {
		return err
	}
	strict := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("%s %s: %w", meta.APIVersion, meta.Kind, err)
		}
		return nil
	}
	switch meta.APIVersion + " " + meta.Kind {
	case "v1 ConfigMap":
		return add(strict, &r.configMaps)
	case "v1 Secret":
		return add(strict, &r.secrets)
	case "v1 Service":
		return add(strict, &r.services)
	case "apps/v1 DaemonSet":
		return add(strict, &r.daemonSets)
	case "apps/v1 Deployment":
		return add(strict, &r.deployments)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return add(strict, &r.monitors)
	case "k8s.cni.cncf.io/v1 NetworkAttachmentDefinition":
		return add(strict, &r.attachments)
	}
	return fmt.Errorf("unexpected %s %s", meta.APIVersion, meta.Kind)
}

func add[T any](strict func(any) error, to *[]T) error {
	var v T
	if err := strict(&v); err != nil {
		return err
	}
	*to = append(*to, v)
	return nil
}

func checkRendered(t *testing.T, r *rendered) {
	t.Helper()
	if len(r.configMaps) != 1 || len(r.secrets) != 1 || len(r.services) != 1 || len(r.monitors) != 1 {
		t.Fatalf("%d ConfigMaps, %d Secrets, %d Services, %d ServiceMonitors; want one each",
			len(r.configMaps), len(r.secrets), len(r.services), len(r.monitors))
	}
	var nodes []string
	var apiPort, pfcpPort int
	var tls *config.TLS
	var netns bool // a node's configuration names a network namespace
	caps := capabilities
	dir := t.TempDir()
	for name, content := range r.configMaps[0].Data {
		node, ok := strings.CutSuffix(name, ".yaml")
		if !ok {
			t.Errorf("ConfigMap key %s: want NODE.yaml", name)
			continue
		}
		nodes = append(nodes, node)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Errorf("node %s: %v", node, err)
			continue
		}
		if cfg.CUUP != nil && cfg.CUUP.IO == config.CUUPAFXDP {
			caps = withAFXDP
		}
		if cfg.API.TokenFile != "/etc/xdp5g/secret/token" {
			t.Errorf("node %s: api.token_file %s, want the Secret's /etc/xdp5g/secret/token", node, cfg.API.TokenFile)
		}
		apiPort = port(t, cfg.API.Listen)
		if cfg.PFCP != nil {
			pfcpPort = port(t, cfg.PFCP.Listen)
		}
		tls = cfg.API.TLS
		netns = netns || cfg.Netns != ""
	}
	if netns {
		caps = append(slices.Clone(caps), "SYS_ADMIN")
	}
	slices.Sort(nodes)

	// Each node's pod: the DaemonSet's on every node, or a Deployment each.
	var scheduled []string
	switch {
	case len(r.daemonSets) == 1 && len(r.deployments) == 0:
		ds := r.daemonSets[0]
		if !ds.Spec.Template.Spec.HostNetwork {
			t.Error("the DaemonSet's pods are not on the host network")
		}
		scheduled = nodeNames(t, ds.Spec.Template.Spec)
		r.podTemplates = append(r.podTemplates, ds.Spec.Template)
	case len(r.daemonSets) == 0 && len(r.deployments) == len(nodes):
		for _, d := range r.deployments {
			if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
				t.Errorf("Deployment %s: %d replicas, strategy %s; want 1, Recreate", d.Name, *d.Spec.Replicas, d.Spec.Strategy.Type)
			}
			scheduled = append(scheduled, nodeNames(t, d.Spec.Template.Spec)...)
			r.podTemplates = append(r.podTemplates, d.Spec.Template)
		}
	default:
		t.Fatalf("%d DaemonSets and %d Deployments for %d nodes", len(r.daemonSets), len(r.deployments), len(nodes))
	}
	slices.Sort(scheduled)
	if !slices.Equal(scheduled, nodes) {
		t.Errorf("pods scheduled on %v, configurations for %v", scheduled, nodes)
	}

	secret := r.secrets[0]
	if len(secret.Data["token"]) < 16 {
		t.Errorf("Secret %s: a token of %d characters, want 16 at least", secret.Name, len(secret.Data["token"]))
	}
	for _, tmpl := range r.podTemplates {
		checkPod(t, tmpl, r, secret.Name, apiPort, pfcpPort, tls, caps, netns)
	}
	svc, sm := r.services[0], r.monitors[0]
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "api" && int(p.Port) == apiPort }) {
		t.Errorf("Service %s has no port api on %d", svc.Name, apiPort)
	}
	if pfcpPort != 0 && !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "pfcp" && int(p.Port) == pfcpPort }) {
		t.Errorf("Service %s has no port pfcp on %d", svc.Name, pfcpPort)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor %s: %d endpoints, want 1", sm.Name, len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "api" || ep.Path != "/metrics" || ep.Authorization == nil ||
		ep.Authorization.Credentials.Name != secret.Name || ep.Authorization.Credentials.Key != "token" {
		t.Errorf("ServiceMonitor %s scrapes %+v; want /metrics on port api with the token of %s", sm.Name, ep, secret.Name)
	}
	if https := tls != nil; (ep.Scheme.String() == "https") != https || (ep.TLSConfig != nil) != https {
		t.Errorf("ServiceMonitor %s scrapes over %s with TLS %+v; the API has TLS %+v", sm.Name, ep.Scheme, ep.TLSConfig, tls)
	}
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor %s selects %s=%s, which Service %s lacks", sm.Name, k, v, svc.Name)
		}
	}
}

// nodeNames are the nodes a pod is pinned to by name.
func nodeNames(t *testing.T, spec corev1.PodSpec) []string {
	t.Helper()
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Fatal("a pod without required node affinity")
	}
	var names []string
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn {
				names = append(names, f.Values...)
			}
		}
	}
	return names
}

// port is the port of a host:port address.
func port(t *testing.T, addr string) int {
	t.Helper()
	var p int
	if _, err := fmt.Sscanf(addr[strings.LastIndex(addr, ":")+1:], "%d", &p); err != nil {
		t.Errorf("address %s: %v", addr, err)
	}
	return p
}

func checkPod(t *testing.T, tmpl corev1.PodTemplateSpec, r *rendered, secret string, apiPort, pfcpPort int, tls *config.TLS, capabilities []corev1.Capability, netns bool) {
	t.Helper()
	spec := tmpl.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want xdp5g's", len(spec.Containers))
	}
	c := spec.Containers[0]
	if !slices.Equal(c.Args, []string{"run", "--config", "/etc/xdp5g/config/$(NODE_NAME).yaml"}) ||
		len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil ||
		c.Env[0].ValueFrom.FieldRef == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("the container runs %v with %+v; want its node's configuration", c.Args, c.Env)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "api" && int(p.ContainerPort) == apiPort }) {
		t.Errorf("no container port api on %d: %+v", apiPort, c.Ports)
	}
	if pfcpPort != 0 && !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "pfcp" && int(p.ContainerPort) == pfcpPort }) {
		t.Errorf("no container port pfcp on %d: %+v", pfcpPort, c.Ports)
	}
	scheme := corev1.URISchemeHTTP
	if tls != nil {
		scheme = corev1.URISchemeHTTPS
	}
	for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Port.StrVal != "api" ||
			probe.HTTPGet.Scheme != scheme {
			t.Errorf("probe %+v, want GET %s on port api over %s", probe, want, scheme)
		}
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(sc.Capabilities.Add, capabilities) || sc.Privileged != nil ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("security context %+v; want all capabilities dropped but %v, a read-only root, no escalation", sc, capabilities)
	}

	mounts := map[string]string{} // volume by mount path
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	if v := volumes[mounts["/sys/fs/bpf"]]; v.HostPath == nil || v.HostPath.Path != "/sys/fs/bpf" {
		t.Errorf("/sys/fs/bpf is %+v; want the host's bpffs", v)
	}
	if v := volumes[mounts["/etc/xdp5g/config"]]; v.ConfigMap == nil || v.ConfigMap.Name != r.configMaps[0].Name {
		t.Errorf("/etc/xdp5g/config is %+v; want ConfigMap %s", v, r.configMaps[0].Name)
	}
	if v := volumes[mounts["/etc/xdp5g/secret"]]; v.Secret == nil || v.Secret.SecretName != secret {
		t.Errorf("/etc/xdp5g/secret is %+v; want Secret %s", v, secret)
	}
	if tls != nil {
		for _, file := range []string{tls.CertFile, tls.KeyFile} {
			if v := volumes[mounts[filepath.Dir(file)]]; v.Secret == nil {
				t.Errorf("%s is in %+v; want a Secret's", file, v)
			}
		}
	}
	if v := volumes[mounts["/var/lib/xdp5g"]]; v.HostPath == nil {
		t.Errorf("/var/lib/xdp5g is %+v; want a directory of the host", v)
	}
	if v := volumes[mounts["/run/netns"]]; netns && (v.HostPath == nil || v.HostPath.Path != "/run/netns") {
		t.Errorf("/run/netns is %+v; want the host's, for config.netns", v)
	}

	// Multus: each network of the pod has its definition.
	selection, ok := tmpl.Annotations["k8s.v1.cni.cncf.io/networks"]
	if spec.HostNetwork != !ok {
		t.Errorf("host network %v with Multus networks %q", spec.HostNetwork, selection)
	}
	if !ok {
		return
	}
	var networks []struct {
		Name      string   `json:"name"`
		Interface string   `json:"interface"`
		IPs       []string `json:"ips"`
	}
	if err := json.Unmarshal([]byte(selection), &networks); err != nil {
		t.Fatalf("the networks annotation: %v", err)
	}
	for _, n := range networks {
		i := slices.IndexFunc(r.attachments, func(a networkAttachmentDefinition) bool { return a.Name == n.Name })
		if i < 0 {
			t.Errorf("network %s has no NetworkAttachmentDefinition", n.Name)
			continue
		}
		var cni struct {
			CNIVersion string `json:"cniVersion"`
			Type       string `json:"type"`
		}
		if err := json.Unmarshal([]byte(r.attachments[i].Spec.Config), &cni); err != nil || cni.CNIVersion == "" ||
			(cni.Type != "macvlan" && cni.Type != "sriov") {
			t.Errorf("NetworkAttachmentDefinition %s: %v, config %s", n.Name, err, r.attachments[i].Spec.Config)
		}
	}
}

// Every value of values.yaml changes what the chart renders: each is
// changed in turn, over an example, and the manifests must differ. A value
// added to values.yaml must be added here. config and nodes are the
// daemon's configuration, which TestChart loads.
func TestEveryValueMatters(t *testing.T) {
	upf, sriov := filepath.Join(chart, "ci", "upf-values.yaml"), filepath.Join(chart, "ci", "upf-classify-values.yaml")
	changes := []struct {
		base string
		sets []string // --set-json, the first naming the value
	}{
		{upf, []string{`image.repository="registry.example.net/xdp5g"`}},
		{upf, []string{`image.tag="1.0"`}},
		{upf, []string{`image.pullPolicy="Always"`}},
		{upf, []string{`workload="Deployment"`}},
		{sriov, []string{`multus.type="macvlan"`}},
		{sriov, []string{`multus.cniVersion="1.0.0"`}},
		{sriov, []string{`multus.networks={"n3":{"resourceName":"example.com/vf"}}`}},
		{sriov, []string{`multus.macvlanMode="vepa"`, `multus.type="macvlan"`}},
		{sriov, []string{`multus.vlan=7`}},
		{upf, []string{`apiToken.existingSecret="upf-token"`}},
		{upf, []string{`apiToken.token="another-token-0123456789"`}},
		{upf, []string{`apiTLS.existingSecret="upf-api-tls"`}},
		{upf, []string{`capabilities=["BPF","PERFMON","NET_ADMIN","NET_RAW","SYS_ADMIN"]`}},
		{upf, []string{`seccompProfile={"type":"Unconfined"}`}},
		{upf, []string{`resources={"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"1","memory":"1Gi"}}`}},
		{upf, []string{`service.pfcp=false`}},
		{upf, []string{`serviceMonitor.enabled=false`}},
		{upf, []string{`serviceMonitor.interval="30s"`}},
		{upf, []string{`serviceMonitor.labels={"team":"core"}`}},
		{upf, []string{`nodeSelector={"xdp5g.io/upf":"true"}`}},
		{upf, []string{`tolerations=[{"operator":"Exists"}]`}},
		{upf, []string{`priorityClassName="upf-critical"`}},
		{upf, []string{`terminationGracePeriodSeconds=60`}},
	}

	// The values, as paths: a map's keys, but for those that are one value.
	data, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	whole := map[string]bool{"config": true, "nodes": true, "multus.networks": true, "resources": true,
		"seccompProfile": true, "serviceMonitor.labels": true, "nodeSelector": true}
	var paths []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := prefix + k
			if sub, ok := v.(map[string]any); ok && !whole[path] {
				walk(path+".", sub)
			} else if path != "config" && path != "nodes" {
				paths = append(paths, path)
			}
		}
	}
	walk("", values)
	var changed []string
	for _, c := range changes {
		changed = append(changed, c.sets[0][:strings.IndexAny(c.sets[0], "=")])
	}
	slices.Sort(paths)
	slices.Sort(changed)
	if !slices.Equal(paths, changed) {
		t.Errorf("values.yaml has %v; the values changed here are %v", paths, changed)
	}

	// The token is random unless given.
	render := func(base string, sets ...string) string {
		args := []string{"template", "xdp5g", chart, "-f", base, "--set-json", `apiToken.token="a-token-of-the-tests-0123"`}
		for _, s := range sets {
			args = append(args, "--set-json", s)
		}
		return runHelm(t, args...)
	}
	bases := map[string]string{upf: render(upf), sriov: render(sriov)}
	for _, c := range changes {
		if render(c.base, c.sets...) == bases[c.base] {
			t.Errorf("%v renders what %s renders without it", c.sets, filepath.Base(c.base))
		}
	}
}
