package check

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ScrapeJob is the pod selection of one Prometheus scrape job with
// Kubernetes pod discovery: the namespaces it lists and the keep and drop
// rules of its relabel_configs.
type ScrapeJob struct {
	Name       string
	Namespaces []string
	rules      []relabelRule
}

type relabelRule struct {
	Action       string   `json:"action"`
	SourceLabels []string `json:"source_labels"`
	Separator    *string  `json:"separator"`
	Regex        *string  `json:"regex"`
}

// The discovery labels of a pod's container port this check can compute;
// a keep or drop rule reading another one is an error (it could not tell
// which pods the job selects).
var podMetaLabel = regexp.MustCompile(`^__meta_kubernetes_(pod_label_[a-zA-Z0-9_]+|pod_container_port_name|pod_container_name|pod_phase|namespace)$`)

// ScrapeJobs reads the Prometheus configuration at file and returns its
// jobs that discover pods (kubernetes_sd_configs with role pod).
func ScrapeJobs(file string) ([]ScrapeJob, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName      string `json:"job_name"`
			KubernetesSD []struct {
				Role       string `json:"role"`
				Namespaces struct {
					Names []string `json:"names"`
				} `json:"namespaces"`
			} `json:"kubernetes_sd_configs"`
			RelabelConfigs []relabelRule `json:"relabel_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var jobs []ScrapeJob
	for _, sc := range cfg.ScrapeConfigs {
		j := ScrapeJob{Name: sc.JobName}
		pods := false
		for _, sd := range sc.KubernetesSD {
			if sd.Role == "pod" {
				pods = true
				j.Namespaces = append(j.Namespaces, sd.Namespaces.Names...)
			}
		}
		if !pods {
			continue
		}
		for _, r := range sc.RelabelConfigs {
			if r.Action != "keep" && r.Action != "drop" {
				continue // replace and friends set target labels; they select nothing
			}
			for _, l := range r.SourceLabels {
				if !podMetaLabel.MatchString(l) {
					return nil, fmt.Errorf("%s: job %s: a %s rule reads %s, which deploy/check cannot compute", file, j.Name, r.Action, l)
				}
			}
			j.rules = append(j.rules, r)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// Targets returns the container ports of pod (running in namespace) that j
// scrapes, by name.
func (j ScrapeJob) Targets(pod *corev1.PodTemplateSpec, namespace string) ([]string, error) {
	if len(j.Namespaces) > 0 && !slices.Contains(j.Namespaces, namespace) {
		return nil, nil
	}
	var out []string
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			meta := map[string]string{
				"__meta_kubernetes_namespace":               namespace,
				"__meta_kubernetes_pod_phase":               "Running",
				"__meta_kubernetes_pod_container_name":      c.Name,
				"__meta_kubernetes_pod_container_port_name": p.Name,
			}
			for k, v := range pod.Labels {
				meta["__meta_kubernetes_pod_label_"+sanitize(k)] = v
			}
			keep, err := j.keeps(meta)
			if err != nil {
				return nil, err
			}
			if keep {
				out = append(out, p.Name)
			}
		}
	}
	return out, nil
}

func (j ScrapeJob) keeps(meta map[string]string) (bool, error) {
	for _, r := range j.rules {
		sep := ";"
		if r.Separator != nil {
			sep = *r.Separator
		}
		expr := "(.*)"
		if r.Regex != nil {
			expr = *r.Regex
		}
		re, err := regexp.Compile("^(?:" + expr + ")$")
		if err != nil {
			return false, fmt.Errorf("job %s: regex %q: %w", j.Name, expr, err)
		}
		values := make([]string, len(r.SourceLabels))
		for i, l := range r.SourceLabels {
			values[i] = meta[l]
		}
		if re.MatchString(strings.Join(values, sep)) != (r.Action == "keep") {
			return false, nil
		}
	}
	return true, nil
}

// sanitize turns a Kubernetes label name into the suffix of its discovery
// label, as Prometheus does: every character outside [a-zA-Z0-9_] becomes _.
func sanitize(name string) string {
	return regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(name, "_")
}
