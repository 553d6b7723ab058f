package check

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// LoadCompose loads the compose file at file as docker compose does, with
// compose-go (the loader of docker compose itself): YAML anchors and merge
// keys, interpolation of ${VAR} from env (a ${VAR:?message} missing from env
// is an error), validation against the compose-spec JSON schema embedded in
// compose-go, normalization and its consistency checks (a depends_on naming
// no service, a volume not declared...).
func LoadCompose(ctx context.Context, file string, env map[string]string) (*types.Project, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	details := types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs}},
		Environment: maps.Clone(env), // the loader adds to it
	}
	p, err := loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName("sluice-check", false)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// CheckComposeServices checks every service of p whose command runs one of
// bins (entrypoint and command, by the binary's base name): its arguments
// are flags the binary defines and its SLUICE_ environment variables are
// ones it reads. A read-only service gets the same rule as a pod: the
// gateway's --state-dir must be a volume. It returns how many services it
// checked.
func CheckComposeServices(p *types.Project, bins map[string]*Binary) (int, error) {
	var errs []error
	n := 0
	names := make([]string, 0, len(p.Services))
	for name := range p.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := p.Services[name]
		command := append(append([]string{}, s.Entrypoint...), s.Command...)
		b, args := lookup(bins, command)
		if b == nil {
			continue
		}
		n++
		env := make([]string, 0, len(s.Environment))
		for k := range s.Environment {
			env = append(env, k)
		}
		sort.Strings(env)
		where := fmt.Sprintf("compose service %s", name)
		errs = append(errs, b.checkAll(where, args, env)...)
		for _, a := range args {
			if dir, ok := cutFlag(a, "--state-dir"); ok && s.ReadOnly && !slices.ContainsFunc(s.Volumes, func(v types.ServiceVolumeConfig) bool { return v.Target == dir && !v.ReadOnly }) {
				errs = append(errs, fmt.Errorf("%s: read_only, and --state-dir %s is not a writable volume", where, dir))
			}
		}
	}
	return n, errors.Join(errs...)
}

// cutFlag returns the value of arg when it is --name=value.
func cutFlag(arg, name string) (string, bool) {
	if len(arg) > len(name)+1 && arg[:len(name)+1] == name+"=" {
		return arg[len(name)+1:], true
	}
	return "", false
}
