// Package check holds the checks of the deployment files under deploy/
// against what consumes them: Kubernetes manifests and the Helm chart's
// rendered objects decoded strictly into their k8s.io/api types, the compose
// file loaded by compose-go (the loader docker compose uses, with the
// compose-spec JSON schema), and the PromQL of the Grafana board and the
// Prometheus alerts parsed by Prometheus's own parser against the metrics
// the binaries define.
//
// It is a module of its own, outside go.work, so that k8s.io/api, Prometheus
// and compose-go never enter the build list of the dataplane or the control
// plane; scripts/check-deploy.sh runs it with GOWORK=off.
package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// Object is one decoded Kubernetes object and where it came from.
type Object struct {
	Source string // file name, or "helm template …"
	Index  int    // document number in Source, from 1
	Kind   string
	Name   string
	Value  any // a pointer to the k8s.io/api type of Kind
}

func (o Object) String() string { return fmt.Sprintf("%s#%d %s/%s", o.Source, o.Index, o.Kind, o.Name) }

// kinds maps "apiVersion kind" to a constructor of its k8s.io/api type.
// A kind not listed is an error: add it here when a manifest needs it.
var kinds = map[string]func() any{
	"v1 Namespace":                             func() any { return &corev1.Namespace{} },
	"v1 ServiceAccount":                        func() any { return &corev1.ServiceAccount{} },
	"v1 Service":                               func() any { return &corev1.Service{} },
	"v1 Secret":                                func() any { return &corev1.Secret{} },
	"v1 ConfigMap":                             func() any { return &corev1.ConfigMap{} },
	"apps/v1 Deployment":                       func() any { return &appsv1.Deployment{} },
	"apps/v1 DaemonSet":                        func() any { return &appsv1.DaemonSet{} },
	"apps/v1 StatefulSet":                      func() any { return &appsv1.StatefulSet{} },
	"policy/v1 PodDisruptionBudget":            func() any { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2 HorizontalPodAutoscaler":   func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"networking.k8s.io/v1 NetworkPolicy":       func() any { return &networkingv1.NetworkPolicy{} },
	"rbac.authorization.k8s.io/v1 Role":        func() any { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1 RoleBinding": func() any { return &rbacv1.RoleBinding{} },
}

// DecodeStrict splits a YAML stream into its documents and decodes each one
// strictly into the k8s.io/api type of its apiVersion and kind: an unknown
// or misspelt field, a duplicate key, a wrong type or an unknown kind is an
// error naming the document. Empty documents (comments only) are skipped.
func DecodeStrict(source string, data []byte) ([]Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []Object
	var errs []error
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, i, err)
		}
		o, err := decodeDoc(source, i, doc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if o != nil {
			objs = append(objs, *o)
		}
	}
	return objs, errors.Join(errs...)
}

func decodeDoc(source string, i int, doc []byte) (*Object, error) {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("%s#%d: %w", source, i, err)
	}
	if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
		return nil, nil
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, fmt.Errorf("%s#%d: %w", source, i, err)
	}
	newObj, ok := kinds[tm.APIVersion+" "+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("%s#%d: apiVersion %q kind %q has no k8s.io/api type in deploy/check (kinds)", source, i, tm.APIVersion, tm.Kind)
	}
	v := newObj()
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		return nil, fmt.Errorf("%s#%d (%s %s): %w", source, i, tm.APIVersion, tm.Kind, err)
	}
	name := ""
	if m, ok := v.(metav1.Object); ok {
		name = m.GetName()
	}
	if name == "" {
		return nil, fmt.Errorf("%s#%d (%s): no metadata.name", source, i, tm.Kind)
	}
	return &Object{Source: source, Index: i, Kind: tm.Kind, Name: name, Value: v}, nil
}

// CheckKustomization decodes the kustomization at file strictly into
// kustomize's own type (what kubectl apply -k reads) and checks that every
// resource it lists is a file beside it.
func CheckKustomization(file string, data []byte) error {
	var k kustypes.Kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if k.APIVersion != kustypes.KustomizationVersion || k.Kind != kustypes.KustomizationKind {
		return fmt.Errorf("%s: apiVersion %q kind %q, want %s %s", file, k.APIVersion, k.Kind, kustypes.KustomizationVersion, kustypes.KustomizationKind)
	}
	var errs []error
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(filepath.Dir(file), r)); err != nil {
			errs = append(errs, fmt.Errorf("%s: resource %s: %w", file, r, err))
		}
	}
	return errors.Join(errs...)
}
