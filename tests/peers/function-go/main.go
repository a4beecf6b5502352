// Command function-go is crossplane-rs's composition function on the official Go SDK
// (github.com/crossplane/function-sdk-go): the peer that the package manager installs as a Function
// package on the node, and that the core calls over mutual TLS.
//
// For each XR it composes one ConfigMap, `from-function`, whose data names the XR and the
// FunctionRevision that served the call (env REVISION_NAME, which the package runtime sets), and it
// marks every composed resource ready once it is observed: at once for kinds without conditions (a
// ConfigMap), else when its Ready condition is True.
//
// It serves as upstream's functions do: gRPC on --address (default :9443) with the certificates of
// --tls-server-certs-dir (env TLS_SERVER_CERTS_DIR: tls.crt, tls.key and ca.crt, the client must
// present a certificate signed by that CA), or without TLS with --insecure.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	"github.com/crossplane/function-sdk-go"
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
)

// composedName is the name of the ConfigMap this function composes, in the Composition's terms.
const composedName = resource.Name("from-function")

// fn runs one pipeline step.
type fn struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
	log      logging.Logger
	revision string
}

// RunFunction composes the ConfigMap and marks observed composed resources ready.
func (f *fn) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	xr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the observed XR: %w", err))
		return rsp, nil
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the desired composed resources: %w", err))
		return rsp, nil
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot read the observed composed resources: %w", err))
		return rsp, nil
	}

	caps := make([]string, 0, len(req.GetMeta().GetCapabilities()))
	for _, c := range req.GetMeta().GetCapabilities() {
		caps = append(caps, c.String())
	}
	cm := &corev1.ConfigMap{Data: map[string]string{
		"xr":           xr.Resource.GetName(),
		"revision":     f.revision,
		"capabilities": strings.Join(caps, ","),
	}}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	cd, err := composed.From(cm)
	if err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot compose the ConfigMap: %w", err))
		return rsp, nil
	}
	desired[composedName] = &resource.DesiredComposed{Resource: cd}

	for name, d := range desired {
		o, ok := observed[name]
		if !ok {
			continue
		}
		status, _ := o.Resource.Object["status"].(map[string]any)
		if _, hasConditions := status["conditions"]; !hasConditions {
			d.Ready = resource.ReadyTrue
			continue
		}
		if o.Resource.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue {
			d.Ready = resource.ReadyTrue
		}
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		response.Fatal(rsp, fmt.Errorf("cannot set the desired composed resources: %w", err))
		return rsp, nil
	}
	f.log.Debug("composed", "xr", xr.Resource.GetName(), "resources", len(desired))
	return rsp, nil
}

func main() {
	address := flag.String("address", ":9443", "address to serve gRPC on")
	certs := flag.String("tls-server-certs-dir", os.Getenv("TLS_SERVER_CERTS_DIR"),
		"directory of tls.crt, tls.key and ca.crt (env TLS_SERVER_CERTS_DIR)")
	insecure := flag.Bool("insecure", false, "serve without TLS")
	debug := flag.Bool("debug", false, "log every call")
	flag.Parse()
	if !*insecure && *certs == "" {
		fmt.Fprintln(os.Stderr, "function-go: give --tls-server-certs-dir (or env TLS_SERVER_CERTS_DIR), or --insecure")
		os.Exit(2)
	}
	log, err := function.NewLogger(*debug)
	if err != nil {
		fmt.Fprintf(os.Stderr, "function-go: cannot create a logger: %v\n", err)
		os.Exit(1)
	}
	if err := corev1.AddToScheme(composed.Scheme); err != nil {
		fmt.Fprintf(os.Stderr, "function-go: cannot register core/v1 kinds: %v\n", err)
		os.Exit(1)
	}
	f := &fn{log: log, revision: os.Getenv("REVISION_NAME")}
	if err := function.Serve(f,
		function.Listen("tcp", *address),
		function.MTLSCertificates(*certs),
		function.Insecure(*insecure),
	); err != nil {
		fmt.Fprintf(os.Stderr, "function-go: %v\n", err)
		os.Exit(1)
	}
}
