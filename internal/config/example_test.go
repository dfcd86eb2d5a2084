package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// examplePath is the configuration users copy: every key, each with a
// comment, each set to its default but the required ones.
const examplePath = "../../docs/xdp5g.example.yaml"

// requiredKeys have no default: the example's values for them are examples.
var requiredKeys = []string{"interfaces", "n3_addresses", "pfcp.node_id", "classify.interfaces", "cuup.n3", "cuup.f1u"}

func TestExampleLoads(t *testing.T) {
	cfg, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.UPF() || cfg.PFCP == nil || cfg.Classify == nil || cfg.CUUP == nil {
		t.Errorf("the example shows every section: UPF %v, pfcp %v, classify %v, cuup %v",
			cfg.UPF(), cfg.PFCP != nil, cfg.Classify != nil, cfg.CUUP != nil)
	}
}

func TestExampleHasEveryKeyWithAComment(t *testing.T) {
	leaves := map[string]bool{} // every key of the file format: true for those that hold a value
	fileKeys(reflect.TypeFor[file](), "", leaves)
	seen := map[string]bool{}
	walkKeys(exampleRoot(t), "", func(path string, key, value *yaml.Node) {
		seen[path] = true
		if leaves[path] && key.HeadComment == "" && key.LineComment == "" && value.LineComment == "" {
			t.Errorf("%s (line %d) has no comment", path, key.Line)
		}
	})
	for path := range leaves {
		if !seen[path] {
			t.Errorf("the example lacks %s", path)
		}
	}
}

func TestExampleHoldsTheDefaults(t *testing.T) {
	root := exampleRoot(t)
	got, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	// The same file with the required keys alone: everything else takes
	// its default.
	minimal, err := yaml.Marshal(onlyRequired(root, ""))
	if err != nil {
		t.Fatal(err)
	}
	want, err := parse(minimal)
	if err != nil {
		t.Fatalf("%v in\n%s", err, minimal)
	}
	for _, section := range []struct {
		name      string
		got, want any
	}{
		{"pfcp", *got.PFCP, *want.PFCP},
		{"classify", *got.Classify, *want.Classify},
		{"cuup", *got.CUUP, *want.CUUP},
	} {
		if !reflect.DeepEqual(section.got, section.want) {
			t.Errorf("%s: the example's values are not the defaults:\n got  %+v\n want %+v", section.name, section.got, section.want)
		}
	}
	got.PFCP, got.Classify, got.CUUP = nil, nil, nil
	want.PFCP, want.Classify, want.CUUP = nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the example's values are not the defaults:\n got  %+v\n want %+v", *got, *want)
	}
}

// The example's classify section, and its cuup section, each run alone
// with the REST API's settings, as the example's comments say: without
// the UPF.
func TestExampleSectionsRunAlone(t *testing.T) {
	root := exampleRoot(t)
	for _, section := range []string{"classify", "cuup"} {
		alone := &yaml.Node{Kind: yaml.MappingNode, Tag: root.Tag}
		for i := 0; i+1 < len(root.Content); i += 2 {
			if key := root.Content[i].Value; key == section || key == "api" {
				alone.Content = append(alone.Content, root.Content[i], root.Content[i+1])
			}
		}
		doc, err := yaml.Marshal(alone)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := parse(doc)
		if err != nil {
			t.Errorf("the example's %s section alone: %v", section, err)
			continue
		}
		if cfg.UPF() || cfg.PFCP != nil || (cfg.Classify != nil) != (section == "classify") || (cfg.CUUP != nil) != (section == "cuup") {
			t.Errorf("the example's %s section alone: UPF %v, pfcp %v, classify %v, cuup %v", section,
				cfg.UPF(), cfg.PFCP != nil, cfg.Classify != nil, cfg.CUUP != nil)
		}
	}
}

// exampleRoot is the example's top-level mapping.
func exampleRoot(t *testing.T) *yaml.Node {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// fileKeys records the keys of a struct of the file format by their dotted
// path, true for a leaf: a key that holds a value rather than keys.
func fileKeys(t reflect.Type, prefix string, leaves map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		path := joinKey(prefix, f.Tag.Get("yaml"))
		inner := f.Type
		for inner.Kind() == reflect.Pointer || inner.Kind() == reflect.Slice {
			inner = inner.Elem()
		}
		leaves[path] = inner.Kind() != reflect.Struct
		if !leaves[path] {
			fileKeys(inner, path, leaves)
		}
	}
}

// walkKeys calls visit for every key of a YAML tree, by dotted path; the
// items of a sequence share their sequence's path.
func walkKeys(n *yaml.Node, prefix string, visit func(path string, key, value *yaml.Node)) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			path := joinKey(prefix, key.Value)
			visit(path, key, value)
			walkKeys(value, path, visit)
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			walkKeys(item, prefix, visit)
		}
	}
}

// onlyRequired copies a mapping with its required keys and the sections
// that hold some.
func onlyRequired(n *yaml.Node, prefix string) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: n.Tag}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		path := joinKey(prefix, key.Value)
		switch {
		case slices.Contains(requiredKeys, path):
			out.Content = append(out.Content, key, value)
		case slices.ContainsFunc(requiredKeys, func(r string) bool { return strings.HasPrefix(r, path+".") }):
			out.Content = append(out.Content, key, onlyRequired(value, path))
		}
	}
	return out
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}
