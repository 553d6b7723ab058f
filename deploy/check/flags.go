package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Binary is what a Sluice binary accepts: its flags, and the text of its
// usage (which names the environment variables it reads besides SLUICE_
// and a flag's name).
type Binary struct {
	Name  string
	Flags map[string]bool
	Usage string
}

var flagLine = regexp.MustCompile(`(?m)^  -([a-z0-9][a-z0-9-]*)`)

// ReadBinary runs the binary at file (with its subcommand, if any) and -h,
// and reads its flags from the usage it prints (Go's flag package:
// "  -name type" at the start of a line). Its Name is the file's base name
// and the subcommand.
func ReadBinary(file string, subcommand ...string) (*Binary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, file, append(subcommand, "-h")...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) { // -h may exit 0 or 2; anything else is a failure
			return nil, fmt.Errorf("%s -h: %w", file, err)
		}
	}
	b := &Binary{Name: strings.Join(append([]string{path.Base(file)}, subcommand...), " "), Flags: map[string]bool{}, Usage: out.String()}
	for _, m := range flagLine.FindAllStringSubmatch(b.Usage, -1) {
		b.Flags[m[1]] = true
	}
	if len(b.Flags) == 0 {
		return nil, fmt.Errorf("%s -h printed no flags:\n%s", file, b.Usage)
	}
	return b, nil
}

// CheckArg reports an error when arg is a flag (--name or --name=value)
// that b does not define.
func (b *Binary) CheckArg(arg string) error {
	name, ok := strings.CutPrefix(arg, "--")
	if !ok {
		if name, ok = strings.CutPrefix(arg, "-"); !ok {
			return nil // a value or a subcommand
		}
	}
	name, _, _ = strings.Cut(name, "=")
	if !b.Flags[name] {
		return fmt.Errorf("%s has no flag --%s", b.Name, name)
	}
	return nil
}

// CheckEnv reports an error when env is a SLUICE_ variable b does not read:
// neither SLUICE_ and one of its flags nor a variable its usage names.
func (b *Binary) CheckEnv(env string) error {
	rest, ok := strings.CutPrefix(env, "SLUICE_")
	if !ok {
		return nil
	}
	if b.Flags[strings.ReplaceAll(strings.ToLower(rest), "_", "-")] || regexp.MustCompile(`\b`+env+`\b`).MatchString(b.Usage) {
		return nil
	}
	return fmt.Errorf("%s reads no environment variable %s", b.Name, env)
}

// CheckContainers checks every container of objs whose command runs one of
// bins (by the command's base name): its args are flags the binary defines
// and its SLUICE_ environment variables are ones it reads. It returns how
// many containers it checked.
func CheckContainers(objs []Object, bins map[string]*Binary) (int, error) {
	var errs []error
	n := 0
	for _, w := range workloads(objs) {
		for _, c := range w.pod.Spec.Containers {
			if len(c.Command) == 0 {
				errs = append(errs, fmt.Errorf("%s: container %s: no command (which binary runs?)", w.obj, c.Name))
				continue
			}
			b, args := lookup(bins, append(append([]string{}, c.Command...), c.Args...))
			if b == nil {
				continue
			}
			n++
			errs = append(errs, b.checkAll(fmt.Sprintf("%s: container %s", w.obj, c.Name), args, envNames(c.Env))...)
		}
	}
	return n, errors.Join(errs...)
}

// lookup finds the binary a command line runs in bins, keyed by Binary.Name
// (the base name, and the subcommand when the first argument is one), and
// returns it with the arguments after the binary and subcommand.
func lookup(bins map[string]*Binary, command []string) (*Binary, []string) {
	if len(command) == 0 {
		return nil, nil
	}
	base := path.Base(command[0])
	if len(command) > 1 && !strings.HasPrefix(command[1], "-") {
		if b, ok := bins[base+" "+command[1]]; ok {
			return b, command[2:]
		}
	}
	return bins[base], command[1:]
}

func envNames(env []corev1.EnvVar) []string {
	names := make([]string, len(env))
	for i, e := range env {
		names[i] = e.Name
	}
	return names
}

func (b *Binary) checkAll(where string, args, env []string) []error {
	var errs []error
	for _, a := range args {
		if err := b.CheckArg(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	for _, e := range env {
		if err := b.CheckEnv(e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	return errs
}
