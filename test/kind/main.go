// kind-config-check FILE...: refuses a kind cluster configuration that `kind create cluster --config FILE`
// would refuse, without a container engine. It decodes each file as kind v0.33.0 does
// (pkg/internal/apis/config/encoding/load.go: the apiVersion and kind first, then the public v1alpha4 types
// with go.yaml.in/yaml/v3 and KnownFields, so a misspelt or unknown field is an error), applies the
// v1alpha4 defaults (SetDefaultsCluster) and the cluster name kind gives an unnamed cluster, then runs
// kind's own validation rules (validate.go below). Prints "ok FILE" or the problems, exits 1 on any problem.
package main

import (
	"bytes"
	"fmt"
	"os"

	yaml "go.yaml.in/yaml/v3"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// kind's default cluster name (pkg/cluster/constants.DefaultClusterName), given when the file names none.
const defaultClusterName = "kind"

type typeMeta struct {
	Kind       string `yaml:"kind,omitempty"`
	APIVersion string `yaml:"apiVersion,omitempty"`
}

// Parse decodes a configuration exactly as kind does and returns it with kind's defaults applied.
func Parse(raw []byte) (*v1alpha4.Cluster, error) {
	tm := typeMeta{}
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return nil, fmt.Errorf("could not determine kind / apiVersion for config: %w", err)
	}
	if tm.APIVersion != "kind.x-k8s.io/v1alpha4" {
		return nil, fmt.Errorf("unknown apiVersion: %s", tm.APIVersion)
	}
	if tm.Kind != "Cluster" {
		return nil, fmt.Errorf("unknown kind %s for apiVersion: %s", tm.Kind, tm.APIVersion)
	}
	cfg := &v1alpha4.Cluster{}
	d := yaml.NewDecoder(bytes.NewReader(raw))
	d.KnownFields(true)
	if err := d.Decode(cfg); err != nil {
		return nil, fmt.Errorf("unable to decode config: %w", err)
	}
	v1alpha4.SetDefaultsCluster(cfg)
	if cfg.Name == "" {
		cfg.Name = defaultClusterName
	}
	return cfg, nil
}

func check(path string) []error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	cfg, err := Parse(raw)
	if err != nil {
		return []error{err}
	}
	return Validate(cfg)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kind-config-check FILE...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		if errs := check(path); len(errs) > 0 {
			failed = true
			for _, e := range errs {
				fmt.Fprintf(os.Stderr, "%s: %v\n", path, e)
			}
			continue
		}
		fmt.Printf("ok %s\n", path)
	}
	if failed {
		os.Exit(1)
	}
}
