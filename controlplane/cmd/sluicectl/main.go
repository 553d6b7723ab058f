// Command sluicectl manages Sluice rule sets as code and operates gateway
// nodes, as DESIGN.md's "sluicectl" section says.
//
// It speaks the admin API through the client generated from api/openapi.yaml
// (internal/client), validates rule-set files offline with the same api
// package as the server, and prints structural diffs in the console's wording.
// The node commands talk to one gateway's admin endpoint directly, so a node
// stays operable while the control plane is down.
//
// Exit codes: 0 ok, 1 error, 2 diff found differences. Errors are one line on
// stderr, "sluicectl: ...", naming what is wrong; a document with several
// wrong fields gets one line per field.
//
// -o json prints one JSON document on stdout whose shape is documented in the
// docs/sluicectl.md and only ever gains fields.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sluicegw/sluice/api/buildinfo"
)

// errDifferences is returned by diff when the two sides differ: exit code 2.
var errDifferences = errors.New("differences found")

// flagSet is a command's parsed flags.
type flagSet = flag.FlagSet

// errReported is an error already printed in full (one line per field).
var errReported = errors.New("reported")

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// cli is one invocation: its global settings and where it writes.
type cli struct {
	server     string
	token      string
	tokenFile  string
	namespace  string
	output     string
	adminAddr  string
	adminToken string

	stdin          io.Reader
	stdout, stderr io.Writer
	http           *http.Client
}

// command is one sluicectl command; a group has subcommands instead of run.
type command struct {
	name    string
	args    string // usage after the name, e.g. "FILE --title T"
	summary string
	example string
	flags   func(fs *flag.FlagSet) // the command's own flags
	run     func(c *cli, fs *flag.FlagSet, args []string) error
	nargs   [2]int // min, max positional arguments; max -1: any
	sub     []*command
	remote  bool // talks to the admin API (gets the connection flags)
	node    bool // talks to a node's admin endpoint
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, http: &http.Client{Timeout: 30 * time.Second}}
	root := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printGroup(stdout, "sluicectl", root)
		if len(args) == 0 {
			return 1
		}
		return 0
	}
	path := "sluicectl"
	list := root
	for {
		cmd := find(list, args[0])
		if cmd == nil {
			fmt.Fprintf(stderr, "sluicectl: unknown command %q after %q; see %s --help\n", args[0], path, path)
			return 1
		}
		path += " " + cmd.name
		args = args[1:]
		if cmd.sub != nil {
			if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
				printGroup(stdout, path, cmd.sub)
				if len(args) == 0 {
					return 1
				}
				return 0
			}
			list = cmd.sub
			continue
		}
		return c.exec(path, cmd, args)
	}
}

func find(list []*command, name string) *command {
	for _, c := range list {
		if c.name == name {
			return c
		}
	}
	return nil
}

// flagSet builds a command's flags: -o, the connection flags it needs, its own.
func (c *cli) flagSet(path string, cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.output, "o", "table", "output: table, json or yaml")
	if cmd.remote {
		fs.StringVar(&c.server, "server", env("SLUICE_SERVER", "http://127.0.0.1:8080"), "admin API URL ($SLUICE_SERVER)")
		fs.StringVar(&c.token, "token", os.Getenv("SLUICE_TOKEN"), "API token ($SLUICE_TOKEN)")
		fs.StringVar(&c.tokenFile, "token-file", "", "file holding the API token (default: the one sluicectl login saved)")
		fs.StringVar(&c.namespace, "n", os.Getenv("SLUICE_NAMESPACE"), "namespace ($SLUICE_NAMESPACE)")
	}
	if cmd.node {
		fs.StringVar(&c.adminAddr, "admin", env("SLUICE_NODE_ADMIN", "127.0.0.1:9901"), "the node's admin address, host:port or URL ($SLUICE_NODE_ADMIN)")
		fs.StringVar(&c.adminToken, "admin-token", os.Getenv("SLUICE_ADMIN_TOKEN"), "the node's admin token, needed beyond loopback ($SLUICE_ADMIN_TOKEN)")
	}
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	return fs
}

func (c *cli) exec(path string, cmd *command, args []string) int {
	fs := c.flagSet(path, cmd)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommand(c.stdout, path, cmd, fs)
		return 0
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "sluicectl: %s: %v; see %s --help\n", path, err, path)
		return 1
	}
	if len(pos) < cmd.nargs[0] || (cmd.nargs[1] >= 0 && len(pos) > cmd.nargs[1]) {
		fmt.Fprintf(c.stderr, "sluicectl: usage: %s %s\n", path, cmd.args)
		return 1
	}
	switch c.output {
	case "table", "json", "yaml":
	default:
		fmt.Fprintf(c.stderr, "sluicectl: -o %q: must be table, json or yaml\n", c.output)
		return 1
	}
	err = cmd.run(c, fs, pos)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errDifferences):
		return 2
	case errors.Is(err, errReported):
		return 1
	default:
		fmt.Fprintf(c.stderr, "sluicectl: %s\n", oneLine(err.Error()))
		return 1
	}
}

// parseInterspersed parses flags wherever they appear among the positional
// arguments ("apply FILE --title T"); "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func printGroup(w io.Writer, path string, list []*command) {
	fmt.Fprintf(w, "Usage: %s COMMAND [flags]\n\nCommands:\n", path)
	for _, c := range list {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's flags and an example.\n", path)
	if path == "sluicectl" {
		fmt.Fprint(w, "\nExit codes: 0 ok, 1 error, 2 diff found differences.\n"+
			"Environment: SLUICE_SERVER, SLUICE_TOKEN, SLUICE_NAMESPACE (SLUICE_ADMIN_TOKEN for node).\n")
	}
}

func printCommand(w io.Writer, path string, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\n\nFlags:\n", path, cmd.args, cmd.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nExample:\n  %s\n", cmd.example)
}

func commands() []*command {
	return []*command{
		{name: "validate", args: "FILE...", summary: "Check rule-set files offline with the server's own validation.",
			example: "sluicectl validate rules/shop.yaml rules/blog.yaml", nargs: [2]int{1, -1}, run: cmdValidate},
		{name: "diff", args: "FILE [--against draft|published]", summary: "Show what FILE changes against the namespace's published version (or draft); exit 2 when they differ.",
			example: "sluicectl diff rules/shop.yaml --against published -n shop", nargs: [2]int{1, 1}, remote: true, flags: diffFlags, run: cmdDiff},
		{name: "apply", args: "FILE --title T [--description D]", summary: "Write FILE to the draft (If-Match from its own read: refused if the draft moved), open a change and print its id.",
			example: "sluicectl apply rules/shop.yaml --title 'raise orders limit' -n shop", nargs: [2]int{1, 1}, remote: true, flags: applyFlags, run: cmdApply},
		{name: "changes", summary: "List, show, approve, reject, publish and schedule changes.", sub: []*command{
			{name: "list", args: "[--state S]", summary: "List the namespace's changes, newest first.", example: "sluicectl changes list --state open -n shop",
				remote: true, flags: func(fs *flag.FlagSet) {
					fs.String("state", "", "only changes in this state: open, approved, rejected, published")
				}, run: cmdChangesList},
			{name: "show", args: "ID", summary: "Show one change with its diff and warnings.", example: "sluicectl changes show 12 -n shop", nargs: [2]int{1, 1}, remote: true, run: cmdChangesShow},
			{name: "approve", args: "ID [--comment C]", summary: "Approve a change (never by its author or an editor of its draft).", example: "sluicectl changes approve 12 --comment lgtm -n shop",
				nargs: [2]int{1, 1}, remote: true, flags: commentFlag, run: cmdReview("approve")},
			{name: "reject", args: "ID [--comment C]", summary: "Reject a change.", example: "sluicectl changes reject 12 --comment 'too tight' -n shop",
				nargs: [2]int{1, 1}, remote: true, flags: commentFlag, run: cmdReview("reject")},
			{name: "publish", args: "ID [--at TIME] [--canary k=v,...]", summary: "Publish an approved change as the next version, to every node or to a canary selector.",
				example: "sluicectl changes publish 12 --canary zone=eu-1 -n shop", nargs: [2]int{1, 1}, remote: true, flags: publishFlags, run: cmdPublish},
			{name: "unschedule", args: "ID", summary: "Cancel a change's scheduled publication (publish --at); it stays approved.",
				example: "sluicectl changes unschedule 12 -n shop", nargs: [2]int{1, 1}, remote: true, run: cmdUnschedule},
		}},
		{name: "versions", summary: "List, show, diff and roll back versions.", sub: []*command{
			{name: "list", summary: "List versions, newest first, with their publication state.", example: "sluicectl versions list -n shop", remote: true, run: cmdVersionsList},
			{name: "show", args: "N", summary: "Print version N's rule set (YAML; -o json for JSON).", example: "sluicectl versions show 3 -n shop", nargs: [2]int{1, 1}, remote: true, run: cmdVersionsShow},
			{name: "diff", args: "A B", summary: "Structural diff from version A to version B (0: the empty rule set); exit 2 when they differ.", example: "sluicectl versions diff 2 3 -n shop", nargs: [2]int{2, 2}, remote: true, run: cmdVersionsDiff},
			{name: "rollback", args: "N --reason R [--emergency]", summary: "Open a change back to version N; --emergency (admins) publishes it at once.",
				example: "sluicectl versions rollback 2 --reason 'p99 doubled' -n shop", nargs: [2]int{1, 1}, remote: true, flags: rollbackFlags, run: cmdRollback},
		}},
		{name: "export", args: "[--version N]", summary: "Print the published (or given) version as YAML.", example: "sluicectl export -n shop > rules/shop.yaml",
			remote: true, flags: func(fs *flag.FlagSet) { fs.Int("version", 0, "this version instead of the newest") }, run: cmdExport},
		{name: "simulate", args: "FILE --log PATH [--format combined|json] [--against published]",
			summary: "Replay an access log through FILE's limits offline, on the log's own clock; --against published shows the published version beside it.",
			example: "sluicectl simulate rules/shop.yaml --log access.log --against published -n shop", nargs: [2]int{1, 1}, remote: true, flags: simulateFlags, run: cmdSimulate},
		{name: "nodes", summary: "The namespace's gateway nodes, through the control plane.", sub: []*command{
			{name: "list", summary: "List live and recently gone nodes.", example: "sluicectl nodes list -n shop", remote: true, run: cmdNodesList},
			{name: "drain", args: "NODE [--ttl D]", summary: "Drain a node (its /readyz fails) until the TTL ends or the override is cleared.",
				example: "sluicectl nodes drain gw-1 --ttl 30m -n shop", nargs: [2]int{1, 1}, remote: true, flags: overrideFlags, run: cmdNodesDrain},
			{name: "degrade", args: "NODE RULE LEVEL [--ttl D]", summary: "Force a degrade rule's level (0, 1, 2) on one node.",
				example: "sluicectl nodes degrade gw-1 checkout 1 --ttl 15m -n shop", nargs: [2]int{3, 3}, remote: true, flags: overrideFlags, run: cmdNodesDegrade},
		}},
		{name: "node", summary: "One node's admin endpoint directly, without the control plane.", sub: []*command{
			{name: "status", summary: "The node's version, source and components.", example: "sluicectl node status --admin 127.0.0.1:9901", node: true, run: cmdNodeGet("/status")},
			{name: "breakers", summary: "The node's circuit breakers and their states.", example: "sluicectl node breakers --admin 127.0.0.1:9901", node: true, run: cmdNodeGet("/breakers")},
			{name: "degrades", summary: "The node's degrade rules and their levels.", example: "sluicectl node degrades --admin 127.0.0.1:9901", node: true, run: cmdNodeGet("/degrades")},
			{name: "degrade", args: "RULE LEVEL --ttl D", summary: "Set a local degrade override on the node that expires by itself.",
				example: "sluicectl node degrade checkout 1 --ttl 10m --admin 10.0.0.5:9901 --admin-token $TOKEN", nargs: [2]int{2, 2}, node: true,
				flags: func(fs *flag.FlagSet) { fs.String("ttl", "", "how long the override lasts, such as 10m (required)") }, run: cmdNodeDegrade},
		}},
		{name: "audit", summary: "The audit log.", sub: []*command{
			{name: "verify", summary: "Walk the audit chain and report the first broken link; exit 1 when it is broken.", example: "sluicectl audit verify", remote: true, run: cmdAuditVerify},
		}},
		{name: "login", args: "--username U [--token-ttl D]", summary: "Log in with a password (from the terminal, or the first line of stdin), save an API token (mode 0600) that expires in 30 days (--token-ttl), and revoke the token it replaces.",
			example: "sluicectl login --username alice --server https://sluice.example.com", remote: true, flags: loginFlags, run: cmdLogin},
		{name: "completion", args: "bash|zsh", summary: "Print a shell completion script.", example: "source <(sluicectl completion bash)", nargs: [2]int{1, 1}, run: cmdCompletion},
		{name: "version", summary: "Print sluicectl's build: version, commit and date (-o json: {version, commit, date}).", example: "sluicectl version", run: cmdVersion},
	}
}

// cmdVersion prints the build (package buildinfo, set by make dist).
func cmdVersion(c *cli, _ *flag.FlagSet, _ []string) error {
	if c.output == "json" {
		return json.NewEncoder(c.stdout).Encode(map[string]string{"version": buildinfo.Version, "commit": buildinfo.Commit, "date": buildinfo.Date})
	}
	_, err := fmt.Fprintln(c.stdout, "sluicectl", buildinfo.String())
	return err
}

func commentFlag(fs *flag.FlagSet) { fs.String("comment", "", "review comment") }

func diffFlags(fs *flag.FlagSet) {
	fs.String("against", "published", "compare with the draft or the published (newest) version")
}

func applyFlags(fs *flag.FlagSet) {
	fs.String("title", "", "the change's title (required)")
	fs.String("description", "", "the change's description")
}

func publishFlags(fs *flag.FlagSet) {
	fs.String("at", "", "publish at this RFC 3339 time instead of now (scheduled publish)")
	fs.String("canary", "", "publish to the nodes with these labels only, k=v,...")
}

func rollbackFlags(fs *flag.FlagSet) {
	fs.String("reason", "", "why (required)")
	fs.Bool("emergency", false, "publish at once without review (admins only; audited)")
}

func overrideFlags(fs *flag.FlagSet) {
	fs.String("ttl", "", "how long the override lasts, such as 15m (default: until cleared)")
	fs.String("reason", "", "why, for the audit log")
}

func loginFlags(fs *flag.FlagSet) {
	fs.String("username", "", "who logs in (required)")
	fs.String("token-name", "", "name of the API token to create (default sluicectl@HOST)")
	fs.Duration("token-ttl", defaultTokenTTL, "lifetime of the API token (0: it never expires)")
}

// defaultTokenTTL is the lifetime of the API token sluicectl login mints.
const defaultTokenTTL = 30 * 24 * time.Hour

// str and num read a command's own flag values.
func str(fs *flag.FlagSet, name string) string { return fs.Lookup(name).Value.String() }

func boolFlag(fs *flag.FlagSet, name string) bool { return fs.Lookup(name).Value.String() == "true" }
