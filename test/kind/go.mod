module tempora.dev/kind-config-check

go 1.22

require (
	go.yaml.in/yaml/v3 v3.0.4
	sigs.k8s.io/kind v0.33.0
)

require github.com/pkg/errors v0.9.1 // indirect
