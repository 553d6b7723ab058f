package check

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// workload is a pod template and its owner.
type workload struct {
	obj      Object
	selector *metav1.LabelSelector
	pod      *corev1.PodTemplateSpec
}

func workloads(objs []Object) []workload {
	var ws []workload
	for _, o := range objs {
		switch v := o.Value.(type) {
		case *appsv1.Deployment:
			ws = append(ws, workload{o, v.Spec.Selector, &v.Spec.Template})
		case *appsv1.DaemonSet:
			ws = append(ws, workload{o, v.Spec.Selector, &v.Spec.Template})
		case *appsv1.StatefulSet:
			ws = append(ws, workload{o, v.Spec.Selector, &v.Spec.Template})
		}
	}
	return ws
}

// Consistent checks what a strict decode cannot: that the objects agree with
// one another and with the rules Sluice's pods run under. Every workload's
// selector matches its pod labels; its pods run non-root with a read-only
// root file system, no privilege escalation, no capabilities and no
// service-account token; every container probes /readyz and /healthz on a
// port it declares; every volume mount names a volume. Every Service,
// PodDisruptionBudget and NetworkPolicy selects some workload's pods, and the
// ports they name are ports those pods declare; every HorizontalPodAutoscaler
// scales a Deployment that is there.
func Consistent(objs []Object) error {
	var errs []error
	fail := func(o Object, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", o, fmt.Sprintf(format, args...)))
	}
	ws := workloads(objs)
	for _, w := range ws {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		switch {
		case err != nil:
			fail(w.obj, "selector: %v", err)
		case sel.Empty():
			fail(w.obj, "empty selector")
		case !sel.Matches(labels.Set(w.pod.Labels)):
			fail(w.obj, "selector %s does not match the pod labels %v", sel, w.pod.Labels)
		}
		checkPod(w, fail)
	}
	// selected returns the workloads whose pods sel matches.
	selected := func(o Object, sel labels.Selector) []workload {
		var out []workload
		for _, w := range ws {
			if sel.Matches(labels.Set(w.pod.Labels)) {
				out = append(out, w)
			}
		}
		if len(out) == 0 {
			fail(o, "selector %s matches no workload's pods", sel)
		}
		return out
	}
	for _, o := range objs {
		switch v := o.Value.(type) {
		case *corev1.Service:
			if len(v.Spec.Selector) == 0 {
				continue // endpoints managed elsewhere
			}
			for _, w := range selected(o, labels.SelectorFromSet(v.Spec.Selector)) {
				for _, p := range v.Spec.Ports {
					target := p.TargetPort
					if target == (intstr.IntOrString{}) {
						target = intstr.FromInt32(p.Port) // targetPort defaults to port
					}
					if !declaresPort(w.pod, target) {
						fail(o, "port %q targets %s, which %s's pods do not declare", p.Name, target.String(), w.obj)
					}
				}
			}
		case *policyv1.PodDisruptionBudget:
			sel, err := metav1.LabelSelectorAsSelector(v.Spec.Selector)
			if err != nil || sel.Empty() {
				fail(o, "selector must select pods (%v)", err)
				continue
			}
			selected(o, sel)
		case *networkingv1.NetworkPolicy:
			sel, err := metav1.LabelSelectorAsSelector(&v.Spec.PodSelector)
			if err != nil || sel.Empty() {
				fail(o, "podSelector must select Sluice's pods, not every pod (%v)", err)
				continue
			}
			for _, w := range selected(o, sel) {
				for _, rule := range v.Spec.Ingress {
					for _, p := range rule.Ports {
						if p.Port != nil && !declaresPort(w.pod, *p.Port) {
							fail(o, "ingress port %s is not declared by %s's pods", p.Port.String(), w.obj)
						}
					}
				}
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			ref := v.Spec.ScaleTargetRef
			if !slices.ContainsFunc(objs, func(t Object) bool { return t.Kind == ref.Kind && t.Name == ref.Name }) {
				fail(o, "scaleTargetRef %s/%s is not among the objects", ref.Kind, ref.Name)
			}
			if v.Spec.MinReplicas != nil && *v.Spec.MinReplicas > v.Spec.MaxReplicas {
				fail(o, "minReplicas %d > maxReplicas %d", *v.Spec.MinReplicas, v.Spec.MaxReplicas)
			}
		}
	}
	return errors.Join(errs...)
}

func checkPod(w workload, fail func(Object, string, ...any)) {
	spec := &w.pod.Spec
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		fail(w.obj, "pod securityContext.runAsNonRoot is not true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		fail(w.obj, "pod securityContext.seccompProfile is not RuntimeDefault")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		fail(w.obj, "automountServiceAccountToken is not false (neither binary talks to the Kubernetes API)")
	}
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
		if mode, ok := fileMode(v); ok && !readable(psc, mode) {
			fail(w.obj, "volume %s: files of mode %#o are owned by root and not readable by the non-root user (give the pod an fsGroup and group read, or other read)", v.Name, mode)
		}
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			fail(w.obj, "container %s: no securityContext", c.Name)
			continue
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			fail(w.obj, "container %s: readOnlyRootFilesystem is not true", c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			fail(w.obj, "container %s: allowPrivilegeEscalation is not false", c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
			fail(w.obj, "container %s: capabilities must drop ALL and add none", c.Name)
		}
		for _, p := range []struct {
			what, path string
			probe      *corev1.Probe
		}{{"readinessProbe", "/readyz", c.ReadinessProbe}, {"livenessProbe", "/healthz", c.LivenessProbe}} {
			switch {
			case p.probe == nil || p.probe.HTTPGet == nil:
				fail(w.obj, "container %s: no httpGet %s", c.Name, p.what)
			case p.probe.HTTPGet.Path != p.path:
				fail(w.obj, "container %s: %s path %q, want %q", c.Name, p.what, p.probe.HTTPGet.Path, p.path)
			case !declaresPort(w.pod, p.probe.HTTPGet.Port):
				fail(w.obj, "container %s: %s port %s is not declared", c.Name, p.what, p.probe.HTTPGet.Port.String())
			}
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			fail(w.obj, "container %s: resources need cpu and memory requests and a memory limit", c.Name)
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				fail(w.obj, "container %s: volumeMount %q names no volume", c.Name, m.Name)
			}
		}
		// With a read-only root file system, the gateway's state dir must be
		// a mounted volume.
		for _, a := range c.Args {
			if dir, ok := strings.CutPrefix(a, "--state-dir="); ok && !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir && !m.ReadOnly }) {
				fail(w.obj, "container %s: --state-dir %s is not a writable volume mount", c.Name, dir)
			}
		}
	}
}

// fileMode is the mode of the files of a Secret, ConfigMap or projected
// volume (Kubernetes's default 0644 when none is given).
func fileMode(v corev1.Volume) (int32, bool) {
	var m *int32
	switch {
	case v.Secret != nil:
		m = v.Secret.DefaultMode
	case v.ConfigMap != nil:
		m = v.ConfigMap.DefaultMode
	case v.Projected != nil:
		m = v.Projected.DefaultMode
	default:
		return 0, false
	}
	if m == nil {
		return 0o644, true
	}
	return *m, true
}

// readable reports whether a non-root user reads a file of mode owned by
// root and, when the pod has an fsGroup, by that group (which the user is in).
func readable(psc *corev1.PodSecurityContext, mode int32) bool {
	return mode&0o004 != 0 || psc != nil && psc.FSGroup != nil && mode&0o040 != 0
}

// declaresPort reports whether a container of pod declares port p (by name
// or number).
func declaresPort(pod *corev1.PodTemplateSpec, p intstr.IntOrString) bool {
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
				return true
			}
		}
	}
	return false
}
