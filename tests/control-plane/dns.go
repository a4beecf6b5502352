//go:build !candidateonly && !pauseonly

package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// dnsTTL is how long a Pod's resolver may keep an answer, as CoreDNS's kubernetes plugin's default.
const dnsTTL = 5

// runDNS serves the cluster's DNS for the Pods of a test bed with a node: the A records of Services,
// `<service>.<namespace>.svc.<domain>`, as the Kubernetes DNS specification gives them. A Service with a
// cluster IP answers with it; a headless one with the addresses of its ready endpoints (EndpointSlices).
// Every name outside the cluster domain is refused: nothing leaves the machine. The kubelet points the
// Pods at it (clusterDNS), and it listens on the node's address, which the Pods reach on the bridge.
func runDNS(args []string) int {
	fs := flag.NewFlagSet("dns", flag.ContinueOnError)
	address := fs.String("address", "", "IP of this machine to serve on, port 53 (required; not 0.0.0.0)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the apiserver to read Services from (required)")
	domain := fs.String("domain", "cluster.local", "the cluster domain")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *address == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "dns: --address and --kubeconfig are required")
		return 2
	}
	if err := oneAddress(*address); err != nil {
		fmt.Fprintf(os.Stderr, "dns: %v\n", err)
		return 2
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dns: reading the kubeconfig: %v\n", err)
		return 1
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dns: %v\n", err)
		return 1
	}
	conn, err := net.ListenPacket("udp", *address)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dns: listen: %v\n", err)
		return 1
	}
	r := &resolver{client: client, suffix: ".svc." + strings.Trim(*domain, ".") + "."}
	fmt.Fprintf(os.Stderr, "dns: serving %s on udp://%s\n", strings.TrimPrefix(r.suffix, "."), conn.LocalAddr())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		_ = conn.Close()
	}()
	buf := make([]byte, 512)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return 0
		}
		query := append([]byte(nil), buf[:n]...)
		go func() {
			if answer := r.answer(query); answer != nil {
				_, _ = conn.WriteTo(answer, from)
			}
		}()
	}
}

// resolver answers queries from the apiserver's Services and EndpointSlices.
type resolver struct {
	client kubernetes.Interface
	suffix string // ".svc.cluster.local."
}

// answer is the response to one query, or nil for a message that is not one.
func (r *resolver) answer(query []byte) []byte {
	var p dnsmessage.Parser
	header, err := p.Start(query)
	if err != nil || header.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	rcode, ips := r.lookup(q)
	fmt.Fprintf(os.Stderr, "dns: %s %s -> %s %v\n", q.Type, q.Name, rcode, ips)
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{
		ID: header.ID, Response: true, Authoritative: rcode != dnsmessage.RCodeRefused,
		RecursionDesired: header.RecursionDesired, RCode: rcode,
	})
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	for _, ip := range ips {
		rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL}
		if b.AResource(rh, dnsmessage.AResource{A: [4]byte(ip.To4())}) != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// lookup gives the response code and the A records of `q`. A name in the cluster domain that names no
// Service is NXDOMAIN; a Service's name asked for another type than A has no records (NOERROR).
func (r *resolver) lookup(q dnsmessage.Question) (dnsmessage.RCode, []net.IP) {
	name := strings.ToLower(q.Name.String())
	if q.Class != dnsmessage.ClassINET || !strings.HasSuffix(name, r.suffix) {
		return dnsmessage.RCodeRefused, nil
	}
	parts := strings.Split(strings.TrimSuffix(name, r.suffix), ".")
	if len(parts) != 2 {
		return dnsmessage.RCodeNameError, nil
	}
	service, namespace := parts[0], parts[1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	svc, err := r.client.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return dnsmessage.RCodeNameError, nil
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dns: reading Service %s/%s: %v\n", namespace, service, err)
		return dnsmessage.RCodeServerFailure, nil
	}
	if q.Type != dnsmessage.TypeA {
		return dnsmessage.RCodeSuccess, nil
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone && svc.Spec.ClusterIP != "" {
		if ip := net.ParseIP(svc.Spec.ClusterIP).To4(); ip != nil {
			return dnsmessage.RCodeSuccess, []net.IP{ip}
		}
		return dnsmessage.RCodeSuccess, nil
	}
	slices, err := r.client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "dns: listing the EndpointSlices of %s/%s: %v\n", namespace, service, err)
		return dnsmessage.RCodeServerFailure, nil
	}
	var ips []net.IP
	for _, s := range slices.Items {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				if ip := net.ParseIP(a).To4(); ip != nil {
					ips = append(ips, ip)
				}
			}
		}
	}
	return dnsmessage.RCodeSuccess, ips
}
