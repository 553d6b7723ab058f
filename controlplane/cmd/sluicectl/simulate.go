package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/proxy"
	"github.com/sluicegw/sluice/dataplane/replay"
)

func simulateFlags(fs *flag.FlagSet) {
	fs.String("log", "", "the access log to replay (required; - for stdin)")
	fs.String("format", "", "the log's format: combined or json (default: from its first line)")
	fs.String("against", "", "published: replay the namespace's published version too, side by side")
	fs.String("host", "", "the Host of lines that name none (combined logs), for routes that match hosts")
	fs.Int("top", replay.DefaultTopKeys, "how many of the most rejected keys to show per limit")
	fs.Int("max-keys", 0, "most keys one limit tracks, as the gateways' --max-keys (0: their default)")
	slashes := proxy.SlashReject
	fs.TextVar(&slashes, "encoded-slashes", proxy.SlashReject, "%2F in paths, as the gateways' --encoded-slashes: reject, decode or keep")
}

// simulateOutput is `simulate -o json`.
type simulateOutput struct {
	Log       string        `json:"log"`
	Stats     replay.Stats  `json:"stats"`
	File      simulateSide  `json:"file"`
	Published *simulateSide `json:"published,omitempty"`
}

// simulateSide is one rule set's replay: the file's or a published version's.
type simulateSide struct {
	Source  string `json:"source"` // the file's name, or "published"
	Version int    `json:"version,omitempty"`
	replay.Result
}

// label names the side in a table: the file's base name or "vN".
func (s *simulateSide) label() string {
	if s.Version > 0 {
		return "v" + strconv.Itoa(s.Version)
	}
	return filepath.Base(s.Source)
}

func cmdSimulate(c *cli, fs *flagSet, args []string) error {
	logPath, against := str(fs, "log"), str(fs, "against")
	if logPath == "" {
		return errors.New("--log PATH is required: the access log to replay")
	}
	if against != "" && against != "published" {
		return fmt.Errorf("--against %q: must be published", against)
	}
	if c.output == "yaml" {
		return errors.New("-o yaml: simulate prints table or json")
	}
	format := replay.Format(str(fs, "format"))
	if _, err := replay.NewReader(nil, format); err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	top, err := strconv.Atoi(str(fs, "top"))
	if err != nil || top < 1 || top > 100 {
		return fmt.Errorf("--top %q: must be a number from 1 to 100", str(fs, "top"))
	}
	rf, err := readRuleFile(args[0])
	if err != nil {
		return err
	}
	if err := c.check(rf); err != nil {
		return err
	}
	valid, err := api.Validated(rf.rs)
	if err != nil {
		return fmt.Errorf("%s: %w", rf.name, err)
	}
	maxKeys, err := strconv.Atoi(str(fs, "max-keys"))
	if err != nil || maxKeys < 0 {
		return fmt.Errorf("--max-keys %q: must be 0 or more", str(fs, "max-keys"))
	}
	var slashes proxy.SlashPolicy
	if err := slashes.UnmarshalText([]byte(str(fs, "encoded-slashes"))); err != nil {
		return fmt.Errorf("--encoded-slashes: %w", err)
	}
	opts := replay.Options{TopKeys: top, MaxKeysPerLimit: maxKeys, EncodedSlashes: slashes}
	out := simulateOutput{Log: logPath, File: simulateSide{Source: rf.name}}
	var sims []*replay.Sim
	defer func() {
		for _, s := range sims {
			s.Close()
		}
	}()
	fileSim, err := replay.New(valid, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", rf.name, err)
	}
	sims = append(sims, fileSim)
	if against == "published" {
		pub, n, err := c.publishedValid(rf)
		if err != nil {
			return err
		}
		s, err := replay.New(pub, opts)
		if err != nil {
			return fmt.Errorf("published version %d: %w", n, err)
		}
		sims = append(sims, s)
		out.Published = &simulateSide{Source: "published", Version: n}
	}

	in := c.stdin
	if logPath != "-" {
		f, err := os.Open(logPath)
		if err != nil {
			return fmt.Errorf("reading the log: %w", err)
		}
		defer f.Close()
		in = f
	}
	lr, err := replay.NewReader(in, format)
	if err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	lr.Host = str(fs, "host")
	// A replay allocates a little per line and keeps little (the limits'
	// keys and counters): collecting at 11× the live heap rather than 2×
	// (capped at 400 MiB in all) takes the collector off the profile. The
	// environment's GOGC or GOMEMLIMIT, when set, wins.
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetGCPercent(1000)
		debug.SetMemoryLimit(400 << 20)
	}
	if out.Stats, err = replay.Run(ctx(), lr, sims...); err != nil {
		return fmt.Errorf("%s: %w", logPath, err)
	}
	if out.File.Result, err = fileSim.Result(); err != nil {
		return err
	}
	if out.Published != nil {
		if out.Published.Result, err = sims[1].Result(); err != nil {
			return err
		}
	}
	if c.output == "json" {
		return c.print(out)
	}
	printSimulate(c.stdout, &out)
	return nil
}

// publishedValid fetches the namespace's published version through the admin
// API (as export does) and validates it as the gateways compile it.
func (c *cli) publishedValid(rf *ruleFile) (*api.Valid, int, error) {
	ns, err := c.ns(rf)
	if err != nil {
		return nil, 0, err
	}
	cl, err := c.api(true)
	if err != nil {
		return nil, 0, err
	}
	rs, n, err := c.published(cl, ns, 0)
	if err != nil {
		return nil, 0, err
	}
	if rs == nil {
		return nil, 0, fmt.Errorf("namespace %s has no published version to compare with", ns)
	}
	v, err := api.Validated(rs)
	if err != nil {
		return nil, 0, fmt.Errorf("published version %d of %s does not validate here: %v", n, ns, err)
	}
	return v, n, nil
}

// printSimulate prints a replay as tables: the log, then per limit the
// file's decisions (and the published version's beside them), then the
// most rejected keys and the notes.
func printSimulate(w io.Writer, out *simulateOutput) {
	st := &out.Stats
	format := string(st.Format)
	if format == "" {
		format = "no lines to tell its format"
	}
	fmt.Fprintf(w, "log %s (%s): %d lines, %d replayed, %d unparseable, %d out of order", out.Log, format, st.Lines, st.Replayed, st.Unparseable, st.OutOfOrder)
	if st.Replayed > 0 {
		fmt.Fprintf(w, "; %s to %s", st.From.Format(time.RFC3339), st.To.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	for _, e := range st.Errors {
		fmt.Fprintf(w, "  unparseable line %d: %s\n", e.Line, e.Err)
	}
	if more := st.Unparseable - int64(len(st.Errors)); more > 0 {
		fmt.Fprintf(w, "  and %d more unparseable lines\n", more)
	}
	sides := []*simulateSide{&out.File}
	if out.Published != nil {
		sides = append(sides, out.Published)
	}
	for _, s := range sides {
		fmt.Fprintf(w, "%s: %d requests, %d matched no route, %d refused by the router, %d refused as ambiguous\n",
			s.label(), s.Requests, s.NoRoute, s.Invalid, s.Ambiguous)
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := []string{"LIMIT", "ALGORITHM", "SCOPE"}
	for _, s := range sides {
		p := ""
		if len(sides) > 1 {
			p = strings.ToUpper(s.label()) + " "
		}
		head = append(head, p+"REQUESTS", "ADMITTED", "REJECTED", "SHADOW")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	ids := ruleIDs(sides)
	for _, id := range ids {
		row := []string{id, "-", "-"}
		for _, s := range sides {
			r := findRule(s, id)
			if r == nil {
				row = append(row, "-", "-", "-", "-")
				continue
			}
			alg := r.Algorithm
			if r.Shadow {
				alg += " (shadow)"
			}
			if row[1] == "-" {
				row[1], row[2] = alg, r.Scope
			} else if row[1] != alg || row[2] != r.Scope {
				row[1], row[2] = row[1]+" → "+alg, row[2]+" → "+r.Scope
			}
			row = append(row, strconv.FormatInt(r.Requests, 10), strconv.FormatInt(r.Admitted, 10),
				strconv.FormatInt(r.Rejected, 10), strconv.FormatInt(r.ShadowRejected, 10))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()

	var keys []string
	for _, id := range ids {
		for _, s := range sides {
			r := findRule(s, id)
			if r == nil || len(r.TopKeys) == 0 {
				continue
			}
			what := id
			if len(sides) > 1 {
				what += " (" + s.label() + ")"
			}
			ks := make([]string, len(r.TopKeys))
			for i, k := range r.TopKeys {
				ks[i] = k.String()
			}
			keys = append(keys, fmt.Sprintf("  %s: %s", what, strings.Join(ks, ", ")))
		}
	}
	if len(keys) > 0 {
		fmt.Fprintln(w, "\ntop rejected keys (rejected or shadow-rejected; ≤: an upper bound):")
		fmt.Fprintln(w, strings.Join(keys, "\n"))
	}
	seen := map[string]bool{}
	for _, s := range sides {
		for _, n := range s.Notes {
			if !seen[n] {
				seen[n] = true
				fmt.Fprintf(w, "note: %s\n", n)
			}
		}
	}
}

// ruleIDs is the limits of every side: the first side's in its order, then
// those only a later side has.
func ruleIDs(sides []*simulateSide) []string {
	var ids []string
	seen := map[string]bool{}
	for _, s := range sides {
		for _, r := range s.Rules {
			if !seen[r.ID] {
				seen[r.ID] = true
				ids = append(ids, r.ID)
			}
		}
	}
	return ids
}

func findRule(s *simulateSide, id string) *replay.RuleResult {
	for i := range s.Rules {
		if s.Rules[i].ID == id {
			return &s.Rules[i]
		}
	}
	return nil
}
