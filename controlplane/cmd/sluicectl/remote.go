package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/controlplane/cmd/sluicectl/internal/client"
)

// api returns the generated client for --server, authenticated with the
// token of --token, $SLUICE_TOKEN, --token-file or the saved login.
func (c *cli) api(needToken bool) (*client.Client, error) {
	u, err := url.Parse(c.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: must be an http:// or https:// URL", c.server)
	}
	token := c.token
	if token == "" {
		file := c.tokenFile
		if file == "" {
			if p, err := tokenPath(); err == nil {
				if _, err := os.Stat(p); err == nil {
					file = p
				}
			}
		}
		if file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("reading the token file: %w", err)
			}
			token = strings.TrimSpace(string(b))
		}
	}
	if token == "" && needToken {
		return nil, errors.New("no API token: pass --token or --token-file, set SLUICE_TOKEN, or run sluicectl login")
	}
	return client.NewClient(strings.TrimRight(c.server, "/"), client.WithHTTPClient(c.http),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if token != "" {
				r.Header.Set("Authorization", "Bearer "+token)
			}
			r.Header.Set("User-Agent", "sluicectl")
			return nil
		}))
}

// ns returns the namespace of -n, else of the file (if any).
func (c *cli) ns(rf *ruleFile) (string, error) {
	n := c.namespace
	if rf != nil && rf.rs != nil && rf.rs.Namespace != "" {
		if n != "" && n != rf.rs.Namespace {
			return "", fmt.Errorf("%s is for namespace %q, not %q (-n)", rf.name, rf.rs.Namespace, n)
		}
		n = rf.rs.Namespace
	}
	if n == "" {
		return "", errors.New("no namespace: pass -n NAMESPACE or set SLUICE_NAMESPACE")
	}
	if !api.ValidID(n) {
		return "", fmt.Errorf("namespace %q: must match [a-z0-9][a-z0-9-]{0,62}", n)
	}
	return n, nil
}

// problemError is a refused request, from the server's problem document.
type problemError struct {
	status int
	p      client.Problem
}

func (e *problemError) Error() string {
	s := fmt.Sprintf("the server answered %d", e.status)
	if e.p.Code != "" {
		s += " " + string(e.p.Code)
	}
	detail := e.p.Title
	if e.p.Detail != nil && *e.p.Detail != "" {
		detail = *e.p.Detail
	}
	if detail != "" {
		s += ": " + detail
	}
	if e.p.Errors != nil {
		var parts []string
		for _, fe := range *e.p.Errors {
			f := api.FieldError{}
			if fe.Path != nil {
				f.Path = *fe.Path
			}
			if fe.Message != nil {
				f.Message = *fe.Message
			}
			if fe.Line != nil {
				f.Line = *fe.Line
			}
			parts = append(parts, f.Error())
		}
		if len(parts) > 0 {
			s += ": " + strings.Join(parts, "; ")
		}
	}
	switch e.status {
	case http.StatusUnauthorized:
		s += " (the token is missing, invalid, expired or revoked: run sluicectl login or pass another --token)"
	}
	return s
}

// into and do finish a call of the generated client: a transport error or a refusal
// becomes an error naming it; a success is decoded into out (unless nil).
func (c *cli) into(out any) func(*http.Response, error) (*http.Response, error) {
	return func(resp *http.Response, err error) (*http.Response, error) { return c.do(resp, err, out) }
}

func (c *cli) do(resp *http.Response, err error, out any) (*http.Response, error) {
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return nil, fmt.Errorf("cannot reach the admin API at %s: %v", c.server, ue.Err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", c.server, err)
	}
	if resp.StatusCode >= 400 {
		pe := &problemError{status: resp.StatusCode}
		if json.Unmarshal(body, &pe.p) != nil || pe.p.Title == "" && pe.p.Code == "" {
			pe.p.Title = http.StatusText(resp.StatusCode)
			if !strings.Contains(resp.Header.Get("Content-Type"), "json") {
				pe.p.Title += " (is " + c.server + " a Sluice admin API?)"
			}
		}
		return resp, pe
	}
	if out != nil {
		if raw, ok := out.(*[]byte); ok {
			*raw = body
		} else if err := json.Unmarshal(body, out); err != nil {
			return resp, fmt.Errorf("the answer of %s is not the admin API's JSON (is it a Sluice admin API?): %v", c.server, err)
		}
	}
	return resp, nil
}

func ctx() context.Context { return context.Background() }

// published returns the namespace's newest version (nil before the first).
func (c *cli) published(cl *client.Client, ns string, n int) (*api.RuleSet, int, error) {
	if n == 0 {
		var nsInfo client.Namespace
		if _, err := c.into(&nsInfo)(cl.GetApiV1NamespacesNs(ctx(), ns)); err != nil {
			return nil, 0, err
		}
		if nsInfo.LatestVersion == nil || *nsInfo.LatestVersion == 0 {
			return nil, 0, nil
		}
		n = *nsInfo.LatestVersion
	}
	var raw []byte
	if _, err := c.into(&raw)(cl.GetApiV1NamespacesNsVersionsN(ctx(), ns, n)); err != nil {
		return nil, 0, err
	}
	rs, err := api.Decode(raw)
	if err != nil {
		return nil, 0, fmt.Errorf("version %d from the server does not decode: %v", n, err)
	}
	return rs, n, nil
}

// draft reads the namespace's draft and its ETag.
func (c *cli) draft(cl *client.Client, ns string) (*api.RuleSet, string, error) {
	var raw []byte
	resp, err := c.into(&raw)(cl.GetApiV1NamespacesNsDraft(ctx(), ns, &client.GetApiV1NamespacesNsDraftParams{}))
	if err != nil {
		return nil, "", err
	}
	rs, err := api.Decode(raw)
	if err != nil {
		return nil, "", fmt.Errorf("the draft from the server does not decode: %v", err)
	}
	return rs, resp.Header.Get("ETag"), nil
}

// diffOutput is `diff -o json`.
type diffOutput struct {
	Namespace   string        `json:"namespace"`
	Against     string        `json:"against"`
	Version     int           `json:"version,omitempty"`
	Differences bool          `json:"differences"`
	Summary     []summaryLine `json:"summary"`
	Warnings    []api.Warning `json:"warnings"`
	Diff        *api.Diff     `json:"diff"`
}

func cmdDiff(c *cli, fs *flagSet, args []string) error {
	against := str(fs, "against")
	if against != "draft" && against != "published" {
		return fmt.Errorf("--against %q: must be draft or published", against)
	}
	rf, cl, ns, err := c.fileClient(args[0])
	if err != nil {
		return err
	}
	var base *api.RuleSet
	n := 0
	if against == "draft" {
		base, _, err = c.draft(cl, ns)
	} else {
		base, n, err = c.published(cl, ns, 0)
	}
	if err != nil {
		return err
	}
	d := api.DiffRuleSets(base, rf.rs)
	warnings := api.Warnings(base, rf.rs)
	if warnings == nil {
		warnings = []api.Warning{}
	}
	lines, general := summarize(d, warnings, rf.rs)
	if c.output == "table" {
		printSummary(c.stdout, lines, general)
	} else if err := c.print(diffOutput{Namespace: ns, Against: against, Version: n, Differences: !d.Empty(), Summary: lines, Warnings: warnings, Diff: d}); err != nil {
		return err
	}
	if !d.Empty() {
		return errDifferences
	}
	return nil
}

func cmdApply(c *cli, fs *flagSet, args []string) error {
	title := str(fs, "title")
	if strings.TrimSpace(title) == "" {
		return errors.New("--title is required: the change's title")
	}
	rf, cl, ns, err := c.fileClient(args[0])
	if err != nil {
		return err
	}
	newest, n, err := c.published(cl, ns, 0)
	if err != nil {
		return err
	}
	if n > 0 && api.DiffRuleSets(newest, rf.rs).Empty() {
		// A change without a difference would be refused after the draft
		// was written; leave the draft (and anyone's edits in it) alone.
		if c.output != "table" {
			return c.print(map[string]any{"change": nil, "version": n})
		}
		fmt.Fprintf(c.stdout, "%s equals version %d of %s: nothing to apply\n", args[0], n, ns)
		return nil
	}
	_, etag, err := c.draft(cl, ns)
	if err != nil {
		return err
	}
	if etag == "" {
		return errors.New("the server sent the draft without an ETag; refusing to write it blind")
	}
	var draft client.Draft
	_, err = c.into(&draft)(cl.PutApiV1NamespacesNsDraftWithBody(ctx(), ns, &client.PutApiV1NamespacesNsDraftParams{IfMatch: etag},
		"application/json", bytes.NewReader(rf.rs.Canonical())))
	var pe *problemError
	if errors.As(err, &pe) && pe.status == http.StatusPreconditionFailed {
		return fmt.Errorf("the draft of %s changed since sluicectl read it (ETag %s): someone else edited it; nothing was written; run sluicectl diff %s --against draft and apply again", ns, etag, args[0])
	}
	if err != nil {
		return fmt.Errorf("writing the draft: %w", err)
	}
	body := client.PostApiV1NamespacesNsChangesJSONRequestBody{Title: title}
	if d := str(fs, "description"); d != "" {
		body.Description = &d
	}
	var ch client.Change
	if _, err := c.into(&ch)(cl.PostApiV1NamespacesNsChanges(ctx(), ns, body)); err != nil {
		return fmt.Errorf("the draft was written (revision %s) but opening the change failed: %w", intStr(draft.Revision), err)
	}
	if c.output != "table" {
		return c.print(map[string]any{"change": ch, "draft": draft})
	}
	fmt.Fprintf(c.stdout, "change %s opened in %s: %s\n", intStr(ch.Id), ns, title)
	printChangeSummary(c.stdout, &ch, rf.rs)
	return nil
}

// changeDiff reads a generated Change's diff and warnings as api types.
func changeDiff(ch *client.Change) (*api.Diff, []api.Warning) {
	var d api.Diff
	if ch.Diff != nil {
		b, _ := json.Marshal(ch.Diff)
		_ = json.Unmarshal(b, &d)
	}
	var ws []api.Warning
	if ch.Warnings != nil {
		b, _ := json.Marshal(ch.Warnings)
		_ = json.Unmarshal(b, &ws)
	}
	return &d, ws
}

// printChangeSummary prints a change's diff and the server's warnings; next,
// when known, is the rule set the change leads to.
func printChangeSummary(w io.Writer, ch *client.Change, next *api.RuleSet) {
	d, ws := changeDiff(ch)
	lines, general := summarize(d, ws, next)
	printSummary(w, lines, general)
}

func intStr(p *int) string {
	if p == nil {
		return "?"
	}
	return strconv.Itoa(*p)
}

func s(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func idArg(what, a string) (int, error) {
	n, err := strconv.Atoi(a)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: must be a number", what, a)
	}
	return n, nil
}

// fileClient reads and validates a rule file (offline, as validate does),
// settles its namespace against -n, and returns an authenticated client.
func (c *cli) fileClient(name string) (*ruleFile, *client.Client, string, error) {
	rf, err := readRuleFile(name)
	if err != nil {
		return nil, nil, "", err
	}
	if err := c.check(rf); err != nil {
		return nil, nil, "", err
	}
	ns, err := c.ns(rf)
	if err != nil {
		return nil, nil, "", err
	}
	cl, err := c.api(true)
	return rf, cl, ns, err
}

func (c *cli) nsClient() (*client.Client, string, error) {
	ns, err := c.ns(nil)
	if err != nil {
		return nil, "", err
	}
	cl, err := c.api(true)
	return cl, ns, err
}

func cmdChangesList(c *cli, fs *flagSet, _ []string) error {
	cl, ns, err := c.nsClient()
	if err != nil {
		return err
	}
	p := &client.GetApiV1NamespacesNsChangesParams{}
	if st := str(fs, "state"); st != "" {
		v := client.GetApiV1NamespacesNsChangesParamsState(st)
		p.State = &v
	}
	var out struct {
		Items []client.Change `json:"items"`
		Next  *int            `json:"next,omitempty"`
	}
	if _, err := c.into(&out)(cl.GetApiV1NamespacesNsChanges(ctx(), ns, p)); err != nil {
		return err
	}
	if out.Items == nil {
		out.Items = []client.Change{}
	}
	if c.output != "table" {
		return c.print(out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tAUTHOR\tBASE\tTITLE")
	for _, ch := range out.Items {
		state := ""
		if ch.State != nil {
			state = string(*ch.State)
		}
		if ch.Stale != nil && *ch.Stale {
			state += " (stale)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", intStr(ch.Id), state, s(ch.Author), intStr(ch.BaseVersion), s(ch.Title))
	}
	return tw.Flush()
}

func (c *cli) change(args []string) (*client.Client, string, int, error) {
	cl, ns, err := c.nsClient()
	if err != nil {
		return nil, "", 0, err
	}
	id, err := idArg("change id", args[0])
	return cl, ns, id, err
}

func cmdChangesShow(c *cli, _ *flagSet, args []string) error {
	cl, ns, id, err := c.change(args)
	if err != nil {
		return err
	}
	var ch client.Change
	if _, err := c.into(&ch)(cl.GetApiV1NamespacesNsChangesId(ctx(), ns, id)); err != nil {
		return err
	}
	if c.output != "table" {
		return c.print(ch)
	}
	state := ""
	if ch.State != nil {
		state = string(*ch.State)
	}
	if ch.Stale != nil && *ch.Stale {
		state += " (stale: its base is no longer the newest version)"
	}
	fmt.Fprintf(c.stdout, "change %s: %s\nstate: %s\nauthor: %s\nbase version: %s\n\n", intStr(ch.Id), s(ch.Title), state, s(ch.Author), intStr(ch.BaseVersion))
	printChangeSummary(c.stdout, &ch, nil)
	return nil
}

func cmdReview(decision string) func(*cli, *flagSet, []string) error {
	return func(c *cli, fs *flagSet, args []string) error {
		cl, ns, id, err := c.change(args)
		if err != nil {
			return err
		}
		body := client.PostApiV1NamespacesNsChangesIdApproveJSONRequestBody{}
		if cm := str(fs, "comment"); cm != "" {
			body.Comment = &cm
		}
		var ch client.Change
		var resp *http.Response
		if decision == "approve" {
			resp, err = cl.PostApiV1NamespacesNsChangesIdApprove(ctx(), ns, id, body)
		} else {
			resp, err = cl.PostApiV1NamespacesNsChangesIdReject(ctx(), ns, id, client.PostApiV1NamespacesNsChangesIdRejectJSONRequestBody(body))
		}
		if _, err := c.do(resp, err, &ch); err != nil {
			return err
		}
		if c.output != "table" {
			return c.print(ch)
		}
		state := ""
		if ch.State != nil {
			state = string(*ch.State)
		}
		fmt.Fprintf(c.stdout, "change %s is %s\n", intStr(ch.Id), state)
		return nil
	}
}

// parseSelector reads k=v,k=v.
func parseSelector(s string) (map[string]string, error) {
	sel := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("--canary %q: must be label=value pairs separated by commas", s)
		}
		sel[k] = v
	}
	return sel, nil
}

func cmdPublish(c *cli, fs *flagSet, args []string) error {
	cl, ns, id, err := c.change(args)
	if err != nil {
		return err
	}
	body := map[string]any{}
	if at := str(fs, "at"); at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return fmt.Errorf("--at %q: must be an RFC 3339 time such as 2026-12-01T18:00:00Z", at)
		}
		body["at"] = t.Format(time.RFC3339)
	}
	if cs := str(fs, "canary"); cs != "" {
		sel, err := parseSelector(cs)
		if err != nil {
			return err
		}
		body["canary"] = map[string]any{"selector": sel}
	}
	b, _ := json.Marshal(body)
	var raw []byte
	resp, err := c.into(&raw)(cl.PostApiV1NamespacesNsChangesIdPublishWithBody(ctx(), ns, id, "application/json", bytes.NewReader(b)))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusAccepted { // scheduled: the answer is the change
		var ch client.Change
		if err := json.Unmarshal(raw, &ch); err != nil || ch.PublishAt == nil {
			return fmt.Errorf("the answer of %s is not a scheduled change: %s", c.server, raw)
		}
		if c.output != "table" {
			return c.print(json.RawMessage(raw))
		}
		fmt.Fprintf(c.stdout, "change %d of %s scheduled: published at %s (cancel with sluicectl changes unschedule %d)\n",
			id, ns, ch.PublishAt.UTC().Format(time.RFC3339), id)
		return nil
	}
	var v client.Version
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("the answer of %s is not a version: %v", c.server, err)
	}
	if c.output != "table" {
		return c.print(json.RawMessage(raw))
	}
	where := "every node"
	if _, ok := body["canary"]; ok {
		where = "the canary nodes"
	}
	fmt.Fprintf(c.stdout, "change %d published as version %s of %s, to %s\n", id, intStr(v.Number), ns, where)
	return nil
}

func cmdUnschedule(c *cli, _ *flagSet, args []string) error {
	cl, ns, id, err := c.change(args)
	if err != nil {
		return err
	}
	var raw []byte
	if _, err := c.into(&raw)(cl.PostApiV1NamespacesNsChangesIdUnschedule(ctx(), ns, id)); err != nil {
		return err
	}
	if c.output != "table" {
		return c.print(json.RawMessage(raw))
	}
	fmt.Fprintf(c.stdout, "change %d of %s is no longer scheduled; it stays approved\n", id, ns)
	return nil
}

func cmdVersionsList(c *cli, _ *flagSet, _ []string) error {
	cl, ns, err := c.nsClient()
	if err != nil {
		return err
	}
	var out struct {
		Items []client.Version `json:"items"`
		Next  *int             `json:"next,omitempty"`
	}
	if _, err := c.into(&out)(cl.GetApiV1NamespacesNsVersions(ctx(), ns, &client.GetApiV1NamespacesNsVersionsParams{})); err != nil {
		return err
	}
	if out.Items == nil {
		out.Items = []client.Version{}
	}
	if c.output != "table" {
		return c.print(out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tCHANGE\tBY\tCREATED\tPUBLICATION\tNOTE")
	for _, v := range out.Items {
		pub := ""
		if v.Publication != nil && v.Publication.State != nil {
			pub = string(*v.Publication.State)
			if v.Publication.Kind != nil && *v.Publication.Kind != "ruleset" {
				pub += " (" + string(*v.Publication.Kind) + ")"
			}
		}
		note := ""
		if v.RollbackOf != nil && *v.RollbackOf > 0 {
			note = "rollback to " + strconv.Itoa(*v.RollbackOf)
		}
		if v.Emergency != nil && *v.Emergency {
			note += " (emergency)"
		}
		created := ""
		if v.CreatedAt != nil {
			created = v.CreatedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", intStr(v.Number), intStr(v.ChangeId), s(v.CreatedBy), created, pub, note)
	}
	return tw.Flush()
}

// printRuleSet writes a rule set in canonical form: YAML, or JSON with -o json.
func (c *cli) printRuleSet(rs *api.RuleSet) error {
	canon := rs.Canonical()
	if c.output == "json" {
		var b bytes.Buffer
		if err := json.Indent(&b, canon, "", "  "); err != nil {
			return err
		}
		b.WriteByte('\n')
		_, err := c.stdout.Write(b.Bytes())
		return err
	}
	y, err := toYAML(canon)
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(y)
	return err
}

func cmdVersionsShow(c *cli, _ *flagSet, args []string) error {
	cl, ns, err := c.nsClient()
	if err != nil {
		return err
	}
	n, err := idArg("version", args[0])
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("version 0 is the empty rule set; versions start at 1")
	}
	rs, _, err := c.published(cl, ns, n)
	if err != nil {
		return err
	}
	return c.printRuleSet(rs)
}

func cmdExport(c *cli, fs *flagSet, _ []string) error {
	cl, ns, err := c.nsClient()
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(str(fs, "version"))
	if n < 0 {
		return errors.New("--version: must be 1 or more")
	}
	rs, _, err := c.published(cl, ns, n)
	if err != nil {
		return err
	}
	if rs == nil {
		return fmt.Errorf("namespace %s has no version yet: nothing was published", ns)
	}
	return c.printRuleSet(rs)
}

func cmdVersionsDiff(c *cli, _ *flagSet, args []string) error {
	cl, ns, err := c.nsClient()
	if err != nil {
		return err
	}
	a, err := idArg("version", args[0])
	if err != nil {
		return err
	}
	b, err := idArg("version", args[1])
	if err != nil {
		return err
	}
	var raw []byte
	if _, err := c.into(&raw)(cl.GetApiV1NamespacesNsVersionsNDiffM(ctx(), ns, a, b)); err != nil {
		return err
	}
	var d api.Diff
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("the answer of %s is not a diff: %v", c.server, err)
	}
	if c.output != "table" {
		if err := c.print(d); err != nil {
			return err
		}
	} else {
		lines, general := summarize(&d, nil, nil)
		printSummary(c.stdout, lines, general)
	}
	if !d.Empty() {
		return errDifferences
	}
	return nil
}

func cmdRollback(c *cli, fs *flagSet, args []string) error {
	cl, ns, err := c.nsClient()
	if err != nil {
		return err
	}
	n, err := idArg("version", args[0])
	if err != nil {
		return err
	}
	reason := str(fs, "reason")
	if strings.TrimSpace(reason) == "" {
		return errors.New("--reason is required: why roll back")
	}
	body := client.PostApiV1NamespacesNsVersionsNRollbackJSONRequestBody{Reason: &reason}
	if boolFlag(fs, "emergency") {
		t := true
		body.Emergency = &t
	}
	var out struct {
		Change  *client.Change  `json:"change,omitempty"`
		Version *client.Version `json:"version,omitempty"`
	}
	if _, err := c.into(&out)(cl.PostApiV1NamespacesNsVersionsNRollback(ctx(), ns, n, body)); err != nil {
		return err
	}
	if c.output != "table" {
		return c.print(out)
	}
	if out.Version != nil {
		fmt.Fprintf(c.stdout, "rolled back to version %d: published as version %s (emergency)\n", n, intStr(out.Version.Number))
	} else if out.Change != nil {
		fmt.Fprintf(c.stdout, "change %s opened to roll back to version %d; it needs an approval and a publish\n", intStr(out.Change.Id), n)
	}
	return nil
}

func cmdNodesList(c *cli, _ *flagSet, _ []string) error {
	cl, ns, err := c.nsClient()
	if err != nil {
		return err
	}
	var out struct {
		Items []client.Node `json:"items"`
	}
	if _, err := c.into(&out)(cl.GetApiV1NamespacesNsNodes(ctx(), ns, &client.GetApiV1NamespacesNsNodesParams{})); err != nil {
		return err
	}
	if out.Items == nil {
		out.Items = []client.Node{}
	}
	if c.output != "table" {
		return c.print(out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tLIVE\tVERSION\tADDRESS\tOVERRIDE\tLAST ERROR")
	for _, n := range out.Items {
		live := "no"
		if n.Live != nil && *n.Live {
			live = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s(n.NodeId), live, intStr(n.Version), s(n.Address), overrideText(n.Override), s(n.LastApplyError))
	}
	return tw.Flush()
}

// overrideText is a node's override for the table, in words: "drain",
// "degrade orders=2", until when and by whom; "" for none. -o json has
// every field.
func overrideText(o *client.Override) string {
	if o == nil {
		return ""
	}
	var parts []string
	if o.Drain != nil && *o.Drain {
		parts = append(parts, "drain")
	}
	if o.DegradeLevels != nil && len(*o.DegradeLevels) > 0 {
		rules := make([]string, 0, len(*o.DegradeLevels))
		for r, l := range *o.DegradeLevels {
			rules = append(rules, fmt.Sprintf("%s=%d", r, l))
		}
		slices.Sort(rules)
		parts = append(parts, "degrade "+strings.Join(rules, ","))
	}
	if len(parts) == 0 {
		parts = append(parts, "none")
	}
	if o.Expires != nil {
		parts = append(parts, "until "+o.Expires.UTC().Format("2006-01-02 15:04 MST"))
	}
	if o.By != nil && *o.By != "" {
		parts = append(parts, "by "+*o.By)
	}
	return strings.Join(parts, " ")
}

func (c *cli) override(fs *flagSet, node string, body client.PutApiV1NamespacesNsNodesIdOverrideJSONRequestBody) error {
	cl, ns, err := c.nsClient()
	if err != nil {
		return err
	}
	if ttl := str(fs, "ttl"); ttl != "" {
		if _, err := api.ParseDuration(ttl); err != nil {
			return fmt.Errorf("--ttl %q: %v", ttl, err)
		}
		body.Ttl = &ttl
	}
	if r := str(fs, "reason"); r != "" {
		body.Reason = &r
	}
	var ov json.RawMessage
	if _, err := c.into((*[]byte)(&ov))(cl.PutApiV1NamespacesNsNodesIdOverride(ctx(), ns, node, body)); err != nil {
		return err
	}
	if c.output != "table" {
		return c.print(ov)
	}
	fmt.Fprintf(c.stdout, "override of node %s written: %s\n", node, compactJSON(ov))
	return nil
}

func cmdNodesDrain(c *cli, fs *flagSet, args []string) error {
	t := true
	return c.override(fs, args[0], client.PutApiV1NamespacesNsNodesIdOverrideJSONRequestBody{Drain: &t})
}

func cmdNodesDegrade(c *cli, fs *flagSet, args []string) error {
	level, err := parseLevel(args[2])
	if err != nil {
		return err
	}
	if !api.ValidID(args[1]) {
		return fmt.Errorf("degrade rule id %q: must match [a-z0-9][a-z0-9-]{0,62}", args[1])
	}
	return c.override(fs, args[0], client.PutApiV1NamespacesNsNodesIdOverrideJSONRequestBody{DegradeLevels: &map[string]int{args[1]: level}})
}

func parseLevel(s string) (int, error) {
	switch s {
	case "0", "1", "2":
		return int(s[0] - '0'), nil
	}
	return 0, fmt.Errorf("level %q: must be 0, 1 or 2", s)
}

func cmdAuditVerify(c *cli, _ *flagSet, _ []string) error {
	cl, err := c.api(true)
	if err != nil {
		return err
	}
	var raw []byte
	if _, err := c.into(&raw)(cl.GetApiV1AuditVerify(ctx())); err != nil {
		return err
	}
	var v struct {
		OK          bool   `json:"ok"`
		Checked     int    `json:"checked"`
		Keyed       bool   `json:"keyed"`
		Checkpoint  string `json:"checkpoint"`
		FirstBroken int    `json:"firstBroken"`
		Reason      string `json:"reason"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("the answer of %s is not a verification: %v", c.server, err)
	}
	if c.output != "table" {
		if err := c.print(json.RawMessage(raw)); err != nil {
			return err
		}
	} else if v.OK {
		fmt.Fprintf(c.stdout, "audit chain ok: %d events checked (keyed: %t, checkpoint: %s)\n", v.Checked, v.Keyed, v.Checkpoint)
	}
	if !v.OK {
		return fmt.Errorf("audit chain broken at event %d: %s", v.FirstBroken, v.Reason)
	}
	return nil
}

// tokenPath is where login saves the token: $XDG_CONFIG_HOME/sluice/token,
// else ~/.config/sluice/token.
func tokenPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no config directory: set XDG_CONFIG_HOME or HOME: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "sluice", "token"), nil
}

// readPassword reads the password without echo from a terminal, else the
// first line of stdin.
func (c *cli) readPassword() (string, error) {
	if f, ok := c.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(c.stderr, "Password: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(c.stderr)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		return string(b), nil
	}
	line, err := bufio.NewReader(io.LimitReader(c.stdin, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password from stdin: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("no password: type it at the terminal or pass it on stdin")
	}
	return line, nil
}

func cmdLogin(c *cli, fs *flagSet, _ []string) error {
	user := str(fs, "username")
	if user == "" {
		return errors.New("--username is required")
	}
	path, err := tokenPath()
	if err != nil {
		return err
	}
	password, err := c.readPassword()
	if err != nil {
		return err
	}
	ttl, err := time.ParseDuration(str(fs, "token-ttl"))
	if err != nil || ttl < 0 {
		return fmt.Errorf("--token-ttl %q: must be a duration such as 720h, or 0 for a token that never expires", str(fs, "token-ttl"))
	}
	var old string // the token login replaces
	if b, err := os.ReadFile(path); err == nil {
		old = strings.TrimSpace(string(b))
	}
	c.token, c.tokenFile = "", os.DevNull
	cl, err := c.api(false)
	if err != nil {
		return err
	}
	var login struct {
		User      client.User `json:"user"`
		CsrfToken string      `json:"csrfToken"`
	}
	resp, err := c.into(&login)(cl.PostApiV1AuthLogin(ctx(), client.PostApiV1AuthLoginJSONRequestBody{Username: user, Password: password}))
	if err != nil {
		return fmt.Errorf("logging in as %s: %w", user, err)
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "sluice_session" {
			session = ck
		}
	}
	if session == nil {
		return errors.New("the server logged in without a session cookie")
	}
	name := str(fs, "token-name")
	if name == "" {
		host, _ := os.Hostname()
		name = "sluicectl@" + host
	}
	role := client.Role("viewer")
	if login.User.Role != nil {
		role = *login.User.Role
	}
	withSession := func(_ context.Context, r *http.Request) error {
		r.Header.Del("Authorization")
		r.AddCookie(session)
		r.Header.Set("X-CSRF-Token", login.CsrfToken)
		return nil
	}
	var tok struct {
		Token string `json:"token"`
	}
	body := client.PostApiV1TokensJSONRequestBody{Name: name, Role: role}
	if ttl > 0 {
		in := strconv.FormatInt(int64(ttl/time.Second), 10) + "s"
		body.ExpiresIn = &in
	}
	if _, err := c.into(&tok)(cl.PostApiV1Tokens(ctx(), body, withSession)); err != nil {
		return fmt.Errorf("creating an API token: %w", err)
	}
	revoked, revokeErr := c.revokeReplaced(cl, old, login.User, withSession)
	_, _ = c.into(nil)(cl.PostApiV1AuthLogout(ctx(), withSession))
	if tok.Token == "" {
		return errors.New("the server created a token without a secret")
	}
	if revokeErr != nil {
		fmt.Fprintf(c.stderr, "sluicectl: the token this login replaces was not revoked: %v\n", revokeErr)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("saving the token: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok.Token+"\n"), 0o600); err != nil {
		return fmt.Errorf("saving the token: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("saving the token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("saving the token: %w", err)
	}
	out := map[string]any{"username": user, "role": role, "tokenName": name, "tokenFile": path}
	if revoked != 0 {
		out["revokedTokenId"] = revoked
	}
	if ttl > 0 {
		out["expiresIn"] = ttl.String()
	}
	if c.output != "table" {
		return c.print(out)
	}
	fmt.Fprintf(c.stdout, "logged in as %s (%s); API token %q saved to %s\n", user, role, name, path)
	if revoked != 0 {
		fmt.Fprintf(c.stdout, "revoked the token it replaces (id %d)\n", revoked)
	}
	return nil
}

// revokeReplaced revokes the API token old, which login is replacing, when
// it is a live token of the user who logged in (another user's token, or
// one already revoked or expired, is left alone). It returns the revoked
// token's id, 0 when none was.
func (c *cli) revokeReplaced(cl *client.Client, old string, user client.User, withSession client.RequestEditorFn) (int64, error) {
	if old == "" || user.Id == nil {
		return 0, nil
	}
	var me struct {
		User    client.User `json:"user"`
		TokenID int64       `json:"tokenId"`
	}
	res, err := cl.GetApiV1Me(ctx(), func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+old)
		return nil
	})
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusUnauthorized {
		return 0, nil // revoked or expired already, or not a token of this server
	}
	if _, err := c.into(&me)(res, nil); err != nil {
		return 0, err
	}
	if me.TokenID == 0 || me.User.Id == nil || *me.User.Id != *user.Id {
		return 0, nil
	}
	if _, err := c.into(nil)(cl.DeleteApiV1TokensId(ctx(), client.Id(me.TokenID), withSession)); err != nil {
		return 0, err
	}
	return me.TokenID, nil
}
