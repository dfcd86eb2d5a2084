{{- define "xdp5g.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "xdp5g.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "xdp5g.labels" -}}
{{ include "xdp5g.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The name of the Secret holding the API's token, under the key "token". */}}
{{- define "xdp5g.tokenSecret" -}}
{{- .Values.apiToken.existingSecret | default (printf "%s-api-token" (include "xdp5g.fullname" .)) -}}
{{- end -}}

{{/* The API's TCP port, from api.listen. */}}
{{- define "xdp5g.apiPort" -}}
{{- include "xdp5g.nodesPort" (dict "root" . "section" "api" "listen" "127.0.0.1:9880") -}}
{{- end -}}

{{- define "xdp5g.scheme" -}}
{{- if .Values.apiTLS.existingSecret }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/* The N4 port, from pfcp.listen (8805 by default). */}}
{{- define "xdp5g.pfcpPort" -}}
{{- include "xdp5g.nodesPort" (dict "root" . "section" "pfcp" "listen" ":8805") -}}
{{- end -}}

{{/*
The port of the listen address of a section of the configuration (.section,
.listen its default): the same on every node, as the Service, the pods and
their probes have one.
*/}}
{{- define "xdp5g.nodesPort" -}}
{{- $ports := list -}}
{{- range $name, $node := .root.Values.nodes -}}
{{- $own := index (($node | default dict).config | default dict) $.section | default dict -}}
{{- $merged := mergeOverwrite (deepCopy (index $.root.Values.config $.section | default dict)) (deepCopy $own) -}}
{{- $listen := $merged.listen | default $.listen -}}
{{- if and (eq $.section "api") (regexMatch "^(127\\.|\\[::1\\]:|localhost:)" $listen) -}}
{{- fail (printf "api.listen: %s on %s is a loopback address, which the probes (at the pod's address) and Prometheus cannot reach; listen on 0.0.0.0 or the node's address" $listen $name) -}}
{{- end -}}
{{- $ports = append $ports (splitList ":" $listen | last | atoi) -}}
{{- end -}}
{{- if gt (len (uniq $ports)) 1 -}}
{{- fail (printf "%s.listen: the nodes listen on ports %v; give them one port, the Service's" .section (uniq $ports)) -}}
{{- end -}}
{{- first $ports | default (splitList ":" .listen | last | atoi) -}}
{{- end -}}

{{/* A node's configuration: config with the node's over it, and the token. */}}
{{- define "xdp5g.nodeConfig" -}}
{{- $cfg := mergeOverwrite (deepCopy .root.Values.config) (deepCopy (.node.config | default dict)) -}}
{{- $_ := set $cfg "api" (merge (dict "token_file" "/etc/xdp5g/secret/token") $cfg.api) -}}
{{- if (($cfg.api).tls | default dict).cert_file -}}
{{- fail "config.api.tls: name a TLS Secret in apiTLS.existingSecret instead; the chart mounts it and sets api.tls" -}}
{{- end -}}
{{- if .root.Values.apiTLS.existingSecret -}}
{{- $_ := set $cfg.api "tls" (dict "cert_file" "/etc/xdp5g/tls/tls.crt" "key_file" "/etc/xdp5g/tls/tls.key") -}}
{{- end -}}
{{- /* What the daemon writes goes where the pod mounts the host's directories. */ -}}
{{- $under := dict
  "state_file" (list $cfg.state_file "/var/lib/xdp5g/")
  "pfcp.state_dir" (list ($cfg.pfcp | default dict).state_dir "/var/lib/xdp5g/")
  "classify.rules_file" (list ($cfg.classify | default dict).rules_file "/var/lib/xdp5g/")
  "datapath.pin_path" (list ($cfg.datapath | default dict).pin_path "/sys/fs/bpf/") -}}
{{- range $key, $check := $under -}}
{{- $path := first $check -}}
{{- if and $path (or (not (hasPrefix (last $check) (clean $path))) (eq (clean $path) (trimSuffix "/" (last $check)))) -}}
{{- fail (printf "config.%s: %s is not under %s, the host's directory the pod mounts there" $key $path (last $check)) -}}
{{- end -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
The pod template of the UPF of one node (.node set: workload Deployment,
with its Multus attachments) or of every node in `nodes` (DaemonSet, on the
nodes' own interfaces).
*/}}
{{- define "xdp5g.podTemplate" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
metadata:
  labels:
    {{- include "xdp5g.selectorLabels" $root | nindent 4 }}
    {{- with .node }}
    xdp5g.io/node: {{ . }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    {{- with .node }}
    {{- $addresses := (index $v.nodes .).addresses | default dict }}
    {{- range $name, $_ := $addresses }}
    {{- if not (hasKey $v.multus.networks $name) }}
    {{- fail (printf "nodes.%s.addresses.%s: multus.networks has no network %s (%s)" $.node $name $name (keys $v.multus.networks | sortAlpha | join ", ")) }}
    {{- end }}
    {{- end }}
    {{- $networks := list }}
    {{- range $name, $_ := $v.multus.networks }}
    {{- $network := dict "name" (printf "%s-%s" (include "xdp5g.fullname" $root) $name) "interface" $name }}
    {{- with index $addresses $name }}
    {{- $_ := set $network "ips" . }}
    {{- end }}
    {{- $networks = append $networks $network }}
    {{- end }}
    k8s.v1.cni.cncf.io/networks: {{ toJson $networks | quote }}
    {{- end }}
spec:
  {{- if not .node }}
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  {{- end }}
  automountServiceAccountToken: false
  priorityClassName: {{ $v.priorityClassName }}
  terminationGracePeriodSeconds: {{ $v.terminationGracePeriodSeconds }}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchFields:
              - key: metadata.name
                operator: In
                values: {{ ternary (list .node) (keys $v.nodes | sortAlpha) (not (empty .node)) | toJson }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: xdp5g
      image: "{{ $v.image.repository }}:{{ $v.image.tag | default $root.Chart.AppVersion }}"
      imagePullPolicy: {{ $v.image.pullPolicy }}
      args: [run, --config, /etc/xdp5g/config/$(NODE_NAME).yaml]
      env:
        - name: NODE_NAME
          valueFrom:
            fieldRef: {fieldPath: spec.nodeName}
      ports:
        - {name: api, containerPort: {{ include "xdp5g.apiPort" $root }}, protocol: TCP}
        {{- if $v.config.pfcp }}
        - {name: pfcp, containerPort: {{ include "xdp5g.pfcpPort" $root }}, protocol: UDP}
        {{- end }}
      livenessProbe:
        httpGet: {path: /healthz, port: api, scheme: {{ include "xdp5g.scheme" $root }}}
        periodSeconds: 10
        failureThreshold: 3
      readinessProbe:
        httpGet: {path: /readyz, port: api, scheme: {{ include "xdp5g.scheme" $root }}}
        periodSeconds: 2
      resources:
        {{- $resources := deepCopy $v.resources }}
        {{- if and .node (eq $v.multus.type "sriov") }}
        {{- range $_, $net := $v.multus.networks }}
        {{- $_ := set $resources.requests $net.resourceName "1" }}
        {{- $_ := set $resources.limits $net.resourceName "1" }}
        {{- end }}
        {{- end }}
        {{- toYaml $resources | nindent 8 }}
      securityContext:
        runAsUser: 0
        readOnlyRootFilesystem: true
        allowPrivilegeEscalation: false
        capabilities:
          drop: [ALL]
          add: {{ toJson $v.capabilities }}
        seccompProfile:
          {{- toYaml $v.seccompProfile | nindent 10 }}
      volumeMounts:
        - {name: config, mountPath: /etc/xdp5g/config, readOnly: true}
        - {name: api-token, mountPath: /etc/xdp5g/secret, readOnly: true}
        {{- if $v.apiTLS.existingSecret }}
        - {name: api-tls, mountPath: /etc/xdp5g/tls, readOnly: true}
        {{- end }}
        - {name: bpffs, mountPath: /sys/fs/bpf}
        - {name: state, mountPath: /var/lib/xdp5g}
        {{- if include "xdp5g.netns" $root }}
        - {name: netns, mountPath: /run/netns, readOnly: true, mountPropagation: HostToContainer}
        {{- end }}
  volumes:
    - name: config
      configMap: {name: {{ include "xdp5g.fullname" $root }}}
    - name: api-token
      secret: {secretName: {{ include "xdp5g.tokenSecret" $root }}, defaultMode: 0400}
    {{- with $v.apiTLS.existingSecret }}
    - name: api-tls
      secret: {secretName: {{ . }}, defaultMode: 0400}
    {{- end }}
    # The host's bpffs: the pinned maps and XDP links outlive the pod.
    - name: bpffs
      hostPath: {path: /sys/fs/bpf, type: Directory}
    # The REST API's sessions and the classifier's rules, kept across pods.
    - name: state
      hostPath: {path: /var/lib/xdp5g/{{ include "xdp5g.fullname" $root }}, type: DirectoryOrCreate}
    {{- if include "xdp5g.netns" $root }}
    # The host's named network namespaces, for config.netns.
    - name: netns
      hostPath: {path: /run/netns, type: Directory}
    {{- end }}
{{- end -}}

{{/*
"true" when a node's configuration names a network namespace (netns): the
pod then mounts the host's /run/netns, and enters it with CAP_SYS_ADMIN.
*/}}
{{- define "xdp5g.netns" -}}
{{- $any := .Values.config.netns -}}
{{- range $_, $node := .Values.nodes -}}
{{- $any = or $any (($node | default dict).config | default dict).netns -}}
{{- end -}}
{{- if $any -}}
{{- if not (has "SYS_ADMIN" .Values.capabilities) -}}
{{- fail "config.netns: the daemon enters the namespace with CAP_SYS_ADMIN; add SYS_ADMIN to capabilities" -}}
{{- end -}}
true
{{- end -}}
{{- end -}}
