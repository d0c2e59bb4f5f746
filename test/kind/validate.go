// kind's validation of a cluster configuration, ported from kind v0.33.0's
// pkg/internal/apis/config/validate.go (Apache License 2.0, The Kubernetes Authors) onto the public
// v1alpha4 types: that package is internal to kind's module and cannot be imported. The internal types it
// validates are a field-for-field conversion of v1alpha4 (convert_v1alpha4.go), so the rules read the same
// fields. Keep this file in step with that one when KIND_VERSION changes (build.sh pins it).
package main

import (
	"fmt"
	"net"
	"regexp"
	"strings"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// Similar to valid docker container names; kind prefixes and suffixes it.
var validNameRE = regexp.MustCompile(`^[a-z0-9.-]+$`)

// kind's internal config also knows kube-proxy mode "none" (no kube-proxy), which v1alpha4 has no constant for.
const noneProxyMode v1alpha4.ProxyMode = "none"

// Validate returns every problem kind would report for the (defaulted) configuration.
func Validate(c *v1alpha4.Cluster) []error {
	errs := []error{}
	if !validNameRE.MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("'%s' is not a valid cluster name, cluster names must match `%s`", c.Name, validNameRE.String()))
	}
	if c.Networking.APIServerPort != 0 {
		if err := validatePort(c.Networking.APIServerPort); err != nil {
			errs = append(errs, fmt.Errorf("invalid apiServerPort: %w", err))
		}
	}
	family := c.Networking.IPFamily
	if family != v1alpha4.IPv4Family && family != v1alpha4.IPv6Family && family != v1alpha4.DualStackFamily {
		errs = append(errs, fmt.Errorf("invalid ipFamily: %s", family))
	}
	if err := validateSubnets(c.Networking.PodSubnet, family); err != nil {
		errs = append(errs, fmt.Errorf("invalid pod subnet %v", err))
	}
	if err := validateSubnets(c.Networking.ServiceSubnet, family); err != nil {
		errs = append(errs, fmt.Errorf("invalid service subnet %v", err))
	}
	switch c.Networking.KubeProxyMode {
	case v1alpha4.IPTablesProxyMode, v1alpha4.IPVSProxyMode, v1alpha4.NFTablesProxyMode, noneProxyMode:
	default:
		errs = append(errs, fmt.Errorf("invalid kubeProxyMode: %s", c.Networking.KubeProxyMode))
	}
	controlPlanes := 0
	for i, n := range c.Nodes {
		for _, err := range validateNode(n) {
			errs = append(errs, fmt.Errorf("invalid configuration for node %d: %v", i, err))
		}
		if n.Role == v1alpha4.ControlPlaneRole {
			controlPlanes++
		}
	}
	if controlPlanes < 1 {
		errs = append(errs, fmt.Errorf("must have at least one %s node", v1alpha4.ControlPlaneRole))
	}
	return errs
}

func validateNode(n v1alpha4.Node) []error {
	errs := []error{}
	switch n.Role {
	case v1alpha4.ControlPlaneRole, v1alpha4.WorkerRole:
	default:
		errs = append(errs, fmt.Errorf("%q is not a valid node role", n.Role))
	}
	if n.Image == "" {
		errs = append(errs, fmt.Errorf("image is a required field"))
	}
	for _, m := range n.ExtraPortMappings {
		if err := validatePort(m.HostPort); err != nil {
			errs = append(errs, fmt.Errorf("invalid hostPort: %w", err))
		}
		if err := validatePort(m.ContainerPort); err != nil {
			errs = append(errs, fmt.Errorf("invalid containerPort: %w", err))
		}
	}
	if err := validatePortMappings(n.ExtraPortMappings); err != nil {
		errs = append(errs, fmt.Errorf("invalid portMapping: %w", err))
	}
	return errs
}

// Two mappings clash when they bind the same host port and protocol on the same address, or either on the
// wildcard address (0.0.0.0 and :: are the same to Go's listener). Host ports 0 and -1 are picked at random
// and never clash.
func validatePortMappings(mappings []v1alpha4.PortMapping) error {
	const errMsg = "port mapping with same listen address, port and protocol already configured"
	wildcardV4 := net.ParseIP("0.0.0.0")
	wildcardV6 := net.ParseIP("::")
	bound := map[string]map[string]bool{} // "80/TCP" -> addresses
	for _, m := range mappings {
		if m.HostPort == -1 || m.HostPort == 0 {
			continue
		}
		addr := net.ParseIP(m.ListenAddress)
		if m.ListenAddress == "" {
			addr = wildcardV4
		}
		if addr == nil {
			return fmt.Errorf("invalid listen address: %s", m.ListenAddress)
		}
		addrString := addr.String()
		portProtocol := fmt.Sprintf("%d/%s", m.HostPort, m.Protocol)
		clash := fmt.Errorf("%s: %s:%s", errMsg, addrString, portProtocol)
		if addr.Equal(wildcardV6) {
			addr = wildcardV4
			addrString = addr.String()
		}
		if addrs, ok := bound[portProtocol]; ok {
			if addr.Equal(wildcardV4) && len(addrs) > 0 {
				return clash
			}
			if addrs[addrString] || addrs[wildcardV4.String()] {
				return clash
			}
		} else {
			bound[portProtocol] = map[string]bool{}
		}
		bound[portProtocol][addrString] = true
	}
	return nil
}

// -1 lets the container engine pick the port.
func validatePort(port int32) error {
	if port < -1 || port > 65535 {
		return fmt.Errorf("invalid port number: %d", port)
	}
	return nil
}

func validateSubnets(subnetStr string, family v1alpha4.ClusterIPFamily) error {
	subnets := []*net.IPNet{}
	for _, s := range strings.Split(subnetStr, ",") {
		_, cidr, err := net.ParseCIDR(s)
		if err != nil {
			return fmt.Errorf("failed to parse cidr value:%q with error: %v", s, err)
		}
		subnets = append(subnets, cidr)
	}
	dual := family == v1alpha4.DualStackFamily
	switch {
	case len(subnets) == 0:
		return fmt.Errorf("no subnets defined")
	case dual && len(subnets) > 2:
		return fmt.Errorf("expected one (IPv4 or IPv6) CIDR or two CIDRs from each family for dual-stack networking")
	case dual && len(subnets) == 2:
		if !isDualStack(subnets) {
			return fmt.Errorf("expected one (IPv4 or IPv6) CIDR or two CIDRs from each family for dual-stack networking")
		}
	case !dual && len(subnets) > 1:
		return fmt.Errorf("only one CIDR allowed for single-stack networking")
	case family == v1alpha4.IPv4Family && subnets[0].IP.To4() == nil:
		return fmt.Errorf("expected IPv4 CIDR for IPv4 family")
	case family == v1alpha4.IPv6Family && subnets[0].IP.To4() != nil:
		return fmt.Errorf("expected IPv6 CIDR for IPv6 family")
	}
	return nil
}

// One CIDR of each family.
func isDualStack(cidrs []*net.IPNet) bool {
	v4, v6 := false, false
	for _, c := range cidrs {
		if c.IP.To4() == nil {
			v6 = true
		} else {
			v4 = true
		}
	}
	return v4 && v6
}
