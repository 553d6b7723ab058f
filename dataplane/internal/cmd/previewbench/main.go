// Command previewbench is the etcd side of the dedicated-core benchmark's
// preview case (scripts/bench-dedicated.sh, CASES=preview); it is not built
// by make build.
//
//	previewbench serve --dir D --listen 127.0.0.1:18187 --peer 127.0.0.1:18188 --namespace bench --rules live.yaml
//	previewbench preview --etcd 127.0.0.1:18187 --key D/sign.pem --namespace bench --rules tight.yaml
//	previewbench preview --etcd 127.0.0.1:18187 --namespace bench --stop
//
// serve starts an embedded etcd (data under D), makes a fresh Ed25519
// signing key (D/sign.pem, the public half in D/trust.pem for the
// gateway's --trust-keys), publishes the rules file as version 1 of the
// namespace's rule set, signed as the control plane signs it, and runs until
// SIGTERM or SIGINT. preview writes the rules file, signed, as the
// namespace's preview value (change "bench", for ten minutes), which every
// node following the namespace then runs in shadow; --stop deletes it. The
// values are the ones a real control plane writes (api.Published,
// api.Preview), so the gateway under test takes the same path as in
// production.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/sluicegw/sluice/api"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: previewbench serve --dir D --listen ADDR --peer ADDR --namespace NS --rules FILE | preview --etcd ADDR --namespace NS (--key FILE --rules FILE | --stop)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "preview":
		err = previewCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (serve, preview)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "previewbench:", err)
		os.Exit(1)
	}
}

// readRules decodes and validates a rules file (YAML or JSON).
func readRules(file string) (*api.RuleSet, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	rs, err := api.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if _, err := api.Validated(rs); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return rs, nil
}

func client(addr string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

func put(c *clientv3.Client, key string, val []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Put(ctx, key, string(val))
	return err
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	dir := fs.String("dir", "", "directory for etcd's data and the key files")
	listen := fs.String("listen", "127.0.0.1:18187", "etcd client address")
	peer := fs.String("peer", "127.0.0.1:18188", "etcd peer address")
	ns := fs.String("namespace", "bench", "namespace")
	rulesFile := fs.String("rules", "", "rules file published as version 1")
	_ = fs.Parse(args)
	if *dir == "" || *rulesFile == "" {
		return errors.New("serve needs --dir and --rules")
	}
	rs, err := readRules(*rulesFile)
	if err != nil {
		return err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	privPEM, err := api.MarshalPrivateKey(priv)
	if err != nil {
		return err
	}
	pubPEM, err := api.MarshalPublicKey(pub)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "sign.pem"), privPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "trust.pem"), pubPEM, 0o644); err != nil {
		return err
	}

	cu, pu := url.URL{Scheme: "http", Host: *listen}, url.URL{Scheme: "http", Host: *peer}
	cfg := embed.NewConfig()
	cfg.Name = "previewbench"
	cfg.Dir = filepath.Join(*dir, "etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(*dir, "etcd.log")}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case <-time.After(30 * time.Second):
		return errors.New("etcd not ready within 30s")
	}

	c, err := client(*listen)
	if err != nil {
		return err
	}
	defer c.Close()
	signer, err := api.NewSigner(priv)
	if err != nil {
		return err
	}
	val, err := json.Marshal(api.Published{Version: 1, Checksum: rs.Checksum(), PublishedAt: time.Now().UTC(), PublishedBy: "previewbench", Rules: rs})
	if err != nil {
		return err
	}
	key := api.Keys{}.RuleSet(*ns)
	signed, err := signer.Sign(key, val)
	if err != nil {
		return err
	}
	if err := put(c, key, signed); err != nil {
		return fmt.Errorf("publishing the rules: %w", err)
	}
	fmt.Fprintf(os.Stderr, "previewbench: etcd on %s, %s published (version 1, %s)\n", *listen, key, rs.Checksum())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	}
}

func previewCmd(args []string) error {
	fs := flag.NewFlagSet("preview", flag.ExitOnError)
	addr := fs.String("etcd", "127.0.0.1:18187", "etcd client address")
	keyFile := fs.String("key", "", "PEM signing key (serve's D/sign.pem)")
	ns := fs.String("namespace", "bench", "namespace")
	rulesFile := fs.String("rules", "", "the previewed change's rules file")
	stop := fs.Bool("stop", false, "delete the preview instead")
	_ = fs.Parse(args)
	c, err := client(*addr)
	if err != nil {
		return err
	}
	defer c.Close()
	key := api.Keys{}.Preview(*ns)
	if *stop {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.Delete(ctx, key)
		return err
	}
	if *keyFile == "" || *rulesFile == "" {
		return errors.New("preview needs --key and --rules (or --stop)")
	}
	rs, err := readRules(*rulesFile)
	if err != nil {
		return err
	}
	signer, err := api.ReadSigner(*keyFile)
	if err != nil {
		return err
	}
	rules, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	val, err := json.Marshal(api.Preview{Change: "bench", Checksum: rs.Checksum(), Rules: rules, Until: now.Add(10 * time.Minute), Since: now, By: "previewbench"})
	if err != nil {
		return err
	}
	signed, err := signer.Sign(key, val)
	if err != nil {
		return err
	}
	return put(c, key, signed)
}
