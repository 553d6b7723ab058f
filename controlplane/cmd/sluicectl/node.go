package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicegw/sluice/api"
)

// nodeURL is the node admin endpoint's base URL from --admin (host:port or URL).
func (c *cli) nodeURL(path string) (string, error) {
	a := c.adminAddr
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("--admin %q: must be host:port or an http(s) URL", c.adminAddr)
	}
	return strings.TrimRight(u.String(), "/") + path, nil
}

// nodeCall sends one request to the node's admin endpoint and returns the
// JSON answer; a refusal becomes an error with the node's problem detail.
func (c *cli) nodeCall(method, path string, body []byte) (json.RawMessage, error) {
	u, err := c.nodeURL(path)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.adminToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cannot reach the node admin endpoint at %s: %v", c.adminAddr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the node's answer: %w", err)
	}
	if resp.StatusCode >= 400 {
		var p struct{ Title, Detail string }
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &p) == nil && (p.Title != "" || p.Detail != "") {
			msg = p.Title
			if p.Detail != "" {
				msg = p.Detail
			}
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			msg += " (beyond loopback the node needs --admin-token)"
		}
		return nil, fmt.Errorf("the node at %s answered %d: %s", c.adminAddr, resp.StatusCode, oneLine(msg))
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("the answer of %s%s is not JSON (is it a Sluice node admin endpoint?)", c.adminAddr, path)
	}
	return data, nil
}

func cmdNodeGet(path string) func(*cli, *flagSet, []string) error {
	return func(c *cli, _ *flagSet, _ []string) error {
		data, err := c.nodeCall(http.MethodGet, path, nil)
		if err != nil {
			return err
		}
		if c.output == "yaml" {
			return c.print(data)
		}
		var b bytes.Buffer
		_ = json.Indent(&b, data, "", "  ")
		b.WriteByte('\n')
		_, err = c.stdout.Write(b.Bytes())
		return err
	}
}

func cmdNodeDegrade(c *cli, fs *flagSet, args []string) error {
	rule := args[0]
	if !api.ValidID(rule) {
		return fmt.Errorf("degrade rule id %q: must match [a-z0-9][a-z0-9-]{0,62}", rule)
	}
	level, err := parseLevel(args[1])
	if err != nil {
		return err
	}
	ttl := str(fs, "ttl")
	if ttl == "" {
		return errors.New("--ttl is required: a node override always expires, such as --ttl 10m")
	}
	if _, err := api.ParseDuration(ttl); err != nil {
		return fmt.Errorf("--ttl %q: %v", ttl, err)
	}
	body, _ := json.Marshal(map[string]any{"rule": rule, "level": level, "ttl": ttl})
	data, err := c.nodeCall(http.MethodPost, "/degrade", body)
	if err != nil {
		return err
	}
	if c.output != "table" {
		return c.print(data)
	}
	fmt.Fprintf(c.stdout, "degrade %s on %s: level %d for %s: %s\n", rule, c.adminAddr, level, ttl, compactJSON(data))
	return nil
}
