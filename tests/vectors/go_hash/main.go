// Command go_hash writes test vectors for upstream Kubernetes' object hash,
// hashutil.DeepHashObject(fnv.New128a(), obj) (Kubernetes 1.35 and later; Hash before), as used to order Endpoints ports
// and subsets (pkg/api/v1/endpoints: portsByHash, subsetsByHash) and
// EndpointSlice ports (endpointslice util: portsInOrder).
//
// Build in GOPATH mode so that the local mirror packages under ./src keep
// upstream's import paths and package names (spew prints "v1.EndpointPort",
// "types.UID", ...):
//
//	cd tests/vectors/go_hash && \
//	  GO111MODULE=off GOPATH="$PWD:/usr/share/gocode" GOFLAGS= go run . > ../go_hash.json
//
// The output is fully determined by the fixed seed below.
package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand"
	"os"
	"sort"
	"strings"

	"github.com/davecgh/go-spew/spew"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

const seed = 20240917

// deepHashObject is upstream's k8s.io/kubernetes/pkg/util/hash.DeepHashObject.
func deepHashObject(hasher hash.Hash, objectToWrite interface{}) {
	hasher.Reset()
	printer := spew.ConfigState{
		Indent:         " ",
		SortKeys:       true,
		DisableMethods: true,
		SpewKeys:       true,
	}
	printer.Fprintf(hasher, "%#v", objectToWrite)
}

// spewText is the exact text deepHashObject feeds to the hasher.
func spewText(obj interface{}) string {
	printer := spew.ConfigState{
		Indent:         " ",
		SortKeys:       true,
		DisableMethods: true,
		SpewKeys:       true,
	}
	return printer.Sprintf("%#v", obj)
}

type vector struct {
	Object interface{} `json:"object"`
	Spew   string      `json:"spew"`
	Hash   string      `json:"fnv128a"`
}

func makeVector(obj interface{}) vector {
	text := spewText(obj)
	h := fnv.New128a()
	deepHashObject(h, obj)
	sum := h.Sum(nil)
	check := fnv.New128a()
	check.Write([]byte(text))
	if !bytes.Equal(sum, check.Sum(nil)) {
		panic("hash of spew text differs from DeepHashObject")
	}
	return vector{Object: obj, Spew: text, Hash: hex.EncodeToString(sum)}
}

type sortedCase struct {
	Objects []interface{} `json:"objects"`
	Hash    []string      `json:"fnv128a"`
	// Order[k] is the index in Objects of the element that comes k-th when
	// the list is sorted by hash bytes ascending (== hex ascending).
	Order []int `json:"order"`
}

func makeSortedCase(objs []interface{}) (sortedCase, bool) {
	c := sortedCase{Objects: objs}
	seen := map[string]bool{}
	for _, o := range objs {
		v := makeVector(o)
		if seen[v.Hash] {
			return c, false // duplicates would make the order ambiguous
		}
		seen[v.Hash] = true
		c.Hash = append(c.Hash, v.Hash)
	}
	for i := range objs {
		c.Order = append(c.Order, i)
	}
	sort.Slice(c.Order, func(a, b int) bool { return c.Hash[c.Order[a]] < c.Hash[c.Order[b]] })
	return c, true
}

// ---------------------------------------------------------------- random data

type gen struct{ r *rand.Rand }

func (g *gen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }
func (g *gen) chance(p float64) bool    { return g.r.Float64() < p }
func strPtr(s string) *string           { return &s }
func int32Ptr(i int32) *int32           { return &i }
func protoPtr(p v1.Protocol) *v1.Protocol {
	return &p
}

const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
const hexdigits = "0123456789abcdef"

func (g *gen) word(n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.Intn(len(alphabet))]
	}
	return string(b)
}

var fixedPortNames = []string{
	"", "", "", "a", "p", "x1", "dns", "http", "https", "grpc", "metrics",
	"dns-tcp", "grpc-web", "metrics-port", "a-b-c", "port-1", "web-8080",
	"http-alt", "tcp-9000", "udp-53", "sctp-x", "z",
	"very-long-port-name-with-many-dashes-0123456789-abcdefghijklmn",
}

func (g *gen) portName() string {
	if g.chance(0.75) {
		return fixedPortNames[g.r.Intn(len(fixedPortNames))]
	}
	// Random DNS-label-ish name with dashes.
	parts := 1 + g.r.Intn(3)
	ws := make([]string, parts)
	for i := range ws {
		ws[i] = g.word(1+g.r.Intn(6), alnum)
	}
	return strings.Join(ws, "-")
}

var edgePorts = []int32{
	0, -1, -80, -65535, -32768, -2147483648, 1, 2, 9, 10, 53, 80, 99, 100,
	443, 1000, 8080, 9090, 10000, 65534, 65535, 65536, 2147483647,
}

func (g *gen) portNumber() int32 {
	if g.chance(0.35) {
		return edgePorts[g.r.Intn(len(edgePorts))]
	}
	return int32(1 + g.r.Intn(65535))
}

var protocols = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP, ""}

func (g *gen) protocol() v1.Protocol {
	// Mostly TCP, as in real clusters, but every value appears.
	switch n := g.r.Intn(10); {
	case n < 5:
		return v1.ProtocolTCP
	case n < 7:
		return v1.ProtocolUDP
	case n < 8:
		return v1.ProtocolSCTP
	default:
		return ""
	}
}

var appProtocols = []string{"", "http", "kubernetes.io/h2c", "https", "kubernetes.io/ws", "mycompany.com/my-custom-protocol"}

func (g *gen) appProtocol() *string {
	switch n := g.r.Intn(10); {
	case n < 5:
		return nil
	case n < 6:
		return strPtr("")
	case n < 8:
		return strPtr("http")
	case n < 9:
		return strPtr("kubernetes.io/h2c")
	default:
		return strPtr(appProtocols[3+g.r.Intn(3)])
	}
}

func (g *gen) corePort() v1.EndpointPort {
	return v1.EndpointPort{
		Name:        g.portName(),
		Port:        g.portNumber(),
		Protocol:    g.protocol(),
		AppProtocol: g.appProtocol(),
	}
}

func (g *gen) slicePort() discovery.EndpointPort {
	var p discovery.EndpointPort
	if g.chance(0.75) {
		p.Name = strPtr(g.portName())
	}
	if g.chance(0.8) {
		p.Protocol = protoPtr(g.protocol())
	}
	if g.chance(0.8) {
		p.Port = int32Ptr(g.portNumber())
	}
	p.AppProtocol = g.appProtocol()
	return p
}

func (g *gen) ipv4() string {
	switch g.r.Intn(4) {
	case 0:
		return fmt.Sprintf("10.%d.%d.%d", g.r.Intn(256), g.r.Intn(256), 1+g.r.Intn(254))
	case 1:
		return fmt.Sprintf("10.244.%d.%d", g.r.Intn(8), 2+g.r.Intn(250))
	case 2:
		return fmt.Sprintf("192.168.%d.%d", g.r.Intn(256), 1+g.r.Intn(254))
	default:
		return fmt.Sprintf("172.%d.%d.%d", 16+g.r.Intn(16), g.r.Intn(256), 1+g.r.Intn(254))
	}
}

func (g *gen) hexGroup() string {
	s := strings.TrimLeft(g.word(1+g.r.Intn(4), hexdigits), "0")
	if s == "" {
		s = "0"
	}
	return s
}

func (g *gen) ipv6() string {
	switch g.r.Intn(4) {
	case 0:
		return "fd00:10:244:" + g.hexGroup() + "::" + g.hexGroup()
	case 1:
		return "2001:db8::" + g.hexGroup()
	case 2:
		return "2001:db8:" + g.hexGroup() + ":" + g.hexGroup() + "::" + g.hexGroup() + ":" + g.hexGroup()
	default:
		gs := make([]string, 8)
		gs[0] = "fd12"
		for i := 1; i < 8; i++ {
			gs[i] = g.hexGroup()
		}
		return strings.Join(gs, ":")
	}
}

func (g *gen) uuid() string {
	b := []byte(g.word(32, hexdigits))
	b[12] = '4'
	b[16] = "89ab"[g.r.Intn(4)]
	s := string(b)
	return s[0:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:32]
}

var podPrefixes = []string{"web", "api", "db", "nginx-deployment", "coredns", "my-app", "x"}
var namespaces = []string{"default", "kube-system", "prod", "team-a", "e2e-tests-endpoints-9x7kq"}
var nodeNames = []string{"node-1", "node-2", "worker-a", "kind-control-plane", "ip-10-0-1-5.ec2.internal", "n"}

// spew writes strings raw (unquoted, unescaped); these exercise that.
var oddFieldPaths = []string{"a b", `say "hi" \ bye`, "ünïcode-é-✓"}

func (g *gen) podName() (name string, statefulIndex int) {
	prefix := podPrefixes[g.r.Intn(len(podPrefixes))]
	if g.chance(0.3) {
		i := g.r.Intn(12)
		return fmt.Sprintf("%s-%d", prefix, i), i
	}
	return prefix + "-" + g.word(10, "bcdfghjklmnpqrstvwxz2456789") + "-" + g.word(5, "bcdfghjklmnpqrstvwxz2456789"), -1
}

func (g *gen) address(v6 bool) v1.EndpointAddress {
	var a v1.EndpointAddress
	if v6 {
		a.IP = g.ipv6()
	} else {
		a.IP = g.ipv4()
	}
	pod, idx := g.podName()
	if idx >= 0 && g.chance(0.7) {
		a.Hostname = pod
	} else if g.chance(0.1) {
		a.Hostname = g.pick("h", "host-1", "my-host")
	}
	switch n := g.r.Intn(10); {
	case n < 3:
		a.NodeName = nil
	case n < 4:
		a.NodeName = strPtr("")
	default:
		a.NodeName = strPtr(nodeNames[g.r.Intn(len(nodeNames))])
	}
	if g.chance(0.75) {
		ref := &v1.ObjectReference{
			Kind:      "Pod",
			Namespace: namespaces[g.r.Intn(len(namespaces))],
			Name:      pod,
			UID:       types.UID(g.uuid()),
		}
		if g.chance(0.05) {
			ref.Kind = g.pick("", "Node", "VirtualMachineInstance")
		}
		if g.chance(0.05) {
			ref.Namespace = ""
		}
		if g.chance(0.12) {
			ref.APIVersion = g.pick("v1", "kubevirt.io/v1")
		}
		if g.chance(0.12) {
			ref.ResourceVersion = fmt.Sprintf("%d", 1+g.r.Intn(9999999))
		}
		if g.chance(0.08) {
			ref.FieldPath = g.pick("spec.containers{web}", "spec.containers[2]")
		}
		a.TargetRef = ref
	}
	return a
}

func (g *gen) addresses(n int, v6 bool) []v1.EndpointAddress {
	if n == 0 {
		return nil // upstream's RepackSubsets never produces empty non-nil lists
	}
	out := make([]v1.EndpointAddress, n)
	for i := range out {
		mixed := v6
		if g.chance(0.05) {
			mixed = !v6
		}
		out[i] = g.address(mixed)
	}
	return out
}

func (g *gen) corePorts(n int) []v1.EndpointPort {
	if n == 0 {
		return nil
	}
	out := make([]v1.EndpointPort, n)
	for i := range out {
		out[i] = g.corePort()
	}
	return out
}

func (g *gen) subset(ready, notReady, ports int) v1.EndpointSubset {
	v6 := g.chance(0.3)
	return v1.EndpointSubset{
		Addresses:         g.addresses(ready, v6),
		NotReadyAddresses: g.addresses(notReady, v6),
		Ports:             g.corePorts(ports),
	}
}

// ---------------------------------------------------------------- generation

func main() {
	g := &gen{r: rand.New(rand.NewSource(seed))}

	// Core ports: every protocol x appProtocol combination first, then random.
	var corePorts []v1.EndpointPort
	combApp := []*string{nil, strPtr(""), strPtr("http"), strPtr("kubernetes.io/h2c")}
	for i, proto := range protocols {
		for j, app := range combApp {
			corePorts = append(corePorts, v1.EndpointPort{
				Name:        fixedPortNames[(i*4+j)%len(fixedPortNames)],
				Port:        edgePorts[(i*4+j)%len(edgePorts)],
				Protocol:    proto,
				AppProtocol: app,
			})
		}
	}
	corePorts = append(corePorts,
		v1.EndpointPort{},
		v1.EndpointPort{Port: 80},
		v1.EndpointPort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP},
		v1.EndpointPort{Name: "http", Port: 80, Protocol: v1.ProtocolUDP},
		v1.EndpointPort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP},
		v1.EndpointPort{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP},
		v1.EndpointPort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP, AppProtocol: strPtr("https")},
		v1.EndpointPort{Name: "max", Port: 65535, Protocol: v1.ProtocolSCTP},
		v1.EndpointPort{Name: "min", Port: -2147483648},
		v1.EndpointPort{Name: "neg", Port: -1, Protocol: v1.ProtocolTCP, AppProtocol: strPtr("")},
	)
	for len(corePorts) < 150 {
		corePorts = append(corePorts, g.corePort())
	}

	// Slice ports: all 16 nil/non-nil pointer patterns first, then random.
	var slicePorts []discovery.EndpointPort
	for mask := 0; mask < 16; mask++ {
		var p discovery.EndpointPort
		if mask&1 != 0 {
			p.Name = strPtr(fixedPortNames[(mask+6)%len(fixedPortNames)])
		}
		if mask&2 != 0 {
			p.Protocol = protoPtr(protocols[mask%len(protocols)])
		}
		if mask&4 != 0 {
			p.Port = int32Ptr(edgePorts[(mask*3)%len(edgePorts)])
		}
		if mask&8 != 0 {
			p.AppProtocol = combApp[1+mask%3]
		}
		slicePorts = append(slicePorts, p)
	}
	slicePorts = append(slicePorts,
		discovery.EndpointPort{Name: strPtr(""), Protocol: protoPtr(""), Port: int32Ptr(0), AppProtocol: strPtr("")},
		discovery.EndpointPort{Name: strPtr(""), Protocol: protoPtr(v1.ProtocolTCP), Port: int32Ptr(80)},
		discovery.EndpointPort{Name: strPtr("http"), Protocol: protoPtr(v1.ProtocolTCP), Port: int32Ptr(8080)},
		discovery.EndpointPort{Name: strPtr("http"), Protocol: protoPtr(v1.ProtocolTCP), Port: int32Ptr(8080), AppProtocol: strPtr("http")},
		discovery.EndpointPort{Name: strPtr("dns"), Protocol: protoPtr(v1.ProtocolUDP), Port: int32Ptr(53)},
		discovery.EndpointPort{Name: strPtr("h2c"), Protocol: protoPtr(v1.ProtocolTCP), Port: int32Ptr(9000), AppProtocol: strPtr("kubernetes.io/h2c")},
		discovery.EndpointPort{Protocol: protoPtr(v1.ProtocolSCTP), Port: int32Ptr(-7)},
	)
	for len(slicePorts) < 150 {
		slicePorts = append(slicePorts, g.slicePort())
	}

	// Subsets: hand-picked small shapes, then random, then a few large ones.
	var subsets []v1.EndpointSubset
	subsets = append(subsets,
		v1.EndpointSubset{},
		v1.EndpointSubset{Addresses: []v1.EndpointAddress{{IP: "10.0.0.1"}}},
		v1.EndpointSubset{Addresses: []v1.EndpointAddress{{IP: "10.0.0.1"}}, Ports: []v1.EndpointPort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
		v1.EndpointSubset{NotReadyAddresses: []v1.EndpointAddress{{IP: "10.0.0.1", NodeName: strPtr("")}}, Ports: []v1.EndpointPort{{Port: 80}}},
		v1.EndpointSubset{Addresses: []v1.EndpointAddress{{IP: "fd00::1", Hostname: "web-0", NodeName: strPtr("node-1"),
			TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0", UID: "0f4e0d4c-5a7b-4c5e-9d0e-1b2a3c4d5e6f"}}},
			Ports: []v1.EndpointPort{{Name: "a", Port: 1, Protocol: v1.ProtocolUDP, AppProtocol: strPtr("")}, {Name: "b", Port: 2, Protocol: v1.ProtocolSCTP, AppProtocol: strPtr("http")}}},
		v1.EndpointSubset{Ports: []v1.EndpointPort{{Name: "only-ports", Port: 8080, Protocol: v1.ProtocolTCP}}},
		v1.EndpointSubset{Addresses: []v1.EndpointAddress{{IP: "10.1.1.1", TargetRef: &v1.ObjectReference{}}}},
		v1.EndpointSubset{Addresses: []v1.EndpointAddress{{IP: "10.1.1.2", TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p",
			UID: "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", APIVersion: "v1", ResourceVersion: "123", FieldPath: "spec.containers{web}"}}}},
	)
	for _, fp := range oddFieldPaths {
		s := g.subset(1+g.r.Intn(3), g.r.Intn(2), 1)
		if s.Addresses[0].TargetRef == nil {
			s.Addresses[0].TargetRef = &v1.ObjectReference{Kind: "Pod"}
		}
		s.Addresses[0].TargetRef.FieldPath = fp
		subsets = append(subsets, s)
	}
	for len(subsets) < 146 {
		subsets = append(subsets, g.subset(g.r.Intn(7), g.r.Intn(5), g.r.Intn(4)))
	}
	subsets = append(subsets,
		g.subset(120, 0, 1),
		g.subset(12, 110, 3),
	)

	out := map[string][]vector{}
	for _, p := range corePorts {
		out["core_ports"] = append(out["core_ports"], makeVector(p))
	}
	for _, p := range slicePorts {
		out["slice_ports"] = append(out["slice_ports"], makeVector(p))
	}
	for _, s := range subsets {
		out["subsets"] = append(out["subsets"], makeVector(s))
	}

	// Sorted lists. Half of each kind are near-duplicates (one field varied),
	// as real lists tend to be; the rest are random.
	sorted := map[string][]sortedCase{}
	for len(sorted["core_ports"]) < 20 {
		n := 2 + g.r.Intn(5)
		base := g.corePort()
		objs := make([]interface{}, n)
		for i := range objs {
			p := g.corePort()
			if len(sorted["core_ports"])%2 == 0 {
				p = base
				switch g.r.Intn(3) {
				case 0:
					p.Protocol = protocols[g.r.Intn(len(protocols))]
				case 1:
					p.Port = g.portNumber()
				default:
					p.Name = g.portName()
				}
			}
			objs[i] = p
		}
		if c, ok := makeSortedCase(objs); ok {
			sorted["core_ports"] = append(sorted["core_ports"], c)
		}
	}
	for len(sorted["slice_ports"]) < 20 {
		n := 2 + g.r.Intn(5)
		objs := make([]interface{}, n)
		for i := range objs {
			p := g.slicePort()
			if len(sorted["slice_ports"])%2 == 0 {
				p = discovery.EndpointPort{
					Name:     strPtr(fmt.Sprintf("port-%d", i)),
					Protocol: protoPtr(v1.ProtocolTCP),
					Port:     int32Ptr(int32(8080 + i)),
				}
				if g.chance(0.3) {
					p.AppProtocol = g.appProtocol()
				}
			}
			objs[i] = p
		}
		if c, ok := makeSortedCase(objs); ok {
			sorted["slice_ports"] = append(sorted["slice_ports"], c)
		}
	}
	for len(sorted["subsets"]) < 20 {
		n := 2 + g.r.Intn(4)
		objs := make([]interface{}, n)
		for i := range objs {
			objs[i] = g.subset(g.r.Intn(4), g.r.Intn(3), 1+g.r.Intn(2))
		}
		if c, ok := makeSortedCase(objs); ok {
			sorted["subsets"] = append(sorted["subsets"], c)
		}
	}

	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	w.WriteString("{\n")
	for _, key := range []string{"core_ports", "slice_ports", "subsets"} {
		fmt.Fprintf(w, "  %q: [\n", key)
		for i, v := range out[key] {
			w.WriteString("    ")
			w.Write(marshal(v))
			if i+1 < len(out[key]) {
				w.WriteString(",")
			}
			w.WriteString("\n")
		}
		w.WriteString("  ],\n")
	}
	w.WriteString("  \"sorted\": {\n")
	for k, key := range []string{"core_ports", "slice_ports", "subsets"} {
		fmt.Fprintf(w, "    %q: [\n", key)
		for i, c := range sorted[key] {
			w.WriteString("      ")
			w.Write(marshal(c))
			if i+1 < len(sorted[key]) {
				w.WriteString(",")
			}
			w.WriteString("\n")
		}
		w.WriteString("    ]")
		if k < 2 {
			w.WriteString(",")
		}
		w.WriteString("\n")
	}
	w.WriteString("  }\n}\n")
}

func marshal(v interface{}) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "<nil>" readable in the spew text
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}
