package http_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	sluice "github.com/sluicegw/sluice/controlplane"
	"github.com/sluicegw/sluice/controlplane/internal/testenv"
	"github.com/sluicegw/sluice/etcdwatch/etcdtest"
)

func TestPublishWhileEtcdIsDown(t *testing.T) {
	t.Parallel()
	emb := etcdtest.Start(t)
	e := newEnv(t, envOptions{endpoints: emb.Endpoints, opTimeout: 500 * time.Millisecond})
	_, ed, ap := e.mustShop()
	publishRoutes(t, "shop", ed, ap, "a")
	e.waitPublished("shop", 1, 10*time.Second)

	emb.Stop()
	publishRoutes(t, "shop", ed, ap, "a", "b")
	v3 := publishRoutes(t, "shop", ed, ap, "a", "b", "c")

	// Both wait: version 2 is retried, version 3 queues behind it.
	deadline := time.Now().Add(15 * time.Second)
	for {
		var vs struct{ Items []sluice.Version }
		ap.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/versions", nil).decode(t, &vs)
		p3, p2 := vs.Items[0].Publication, vs.Items[1].Publication
		if p3.State != sluice.PublicationPending || p2.State != sluice.PublicationPending {
			t.Fatalf("published while etcd was down: %+v %+v", p2, p3)
		}
		if p2.Attempts >= 2 && p2.LastError != "" {
			if p3.Attempts != 0 {
				t.Fatalf("version 3 was tried before version 2 landed: %+v", p3)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no retries recorded: %+v", p2)
		}
		time.Sleep(50 * time.Millisecond)
	}

	emb.Restart()
	p := e.waitPublished("shop", 3, 30*time.Second)
	if p.Checksum != v3.Checksum {
		t.Fatalf("checksum %s, want %s", p.Checksum, v3.Checksum)
	}
	// etcd holds version 3; its publication is marked published once the
	// publisher has its write acknowledged. Under load a write that landed
	// can still time out (opTimeout 500 ms): the publication then stays
	// pending until its retry finds the write done, so wait for every row.
	var vs struct{ Items []sluice.Version }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ap.must(http.StatusOK, "GET", "/api/v1/namespaces/shop/versions", nil).decode(t, &vs)
		done := true
		for _, v := range vs.Items {
			done = done && v.Publication.State == sluice.PublicationPublished
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			for _, v := range vs.Items {
				if v.Publication.State != sluice.PublicationPublished {
					t.Fatalf("version %d: %+v", v.Number, v.Publication)
				}
			}
		}
	}
	var revs []int64
	for _, v := range vs.Items {
		revs = append(revs, *v.Publication.EtcdRevision)
	}
	if !(revs[0] > revs[1] && revs[1] > revs[2]) {
		t.Fatalf("etcd revisions of versions 3, 2, 1: %v; want them written in order", revs)
	}
}

// proxy is a TCP proxy to Postgres that a test can cut and restore.
type proxy struct {
	t      testing.TB
	target string
	addr   string
	mu     sync.Mutex
	l      net.Listener
	conns  []net.Conn
}

func startProxy(t testing.TB, target string) *proxy {
	p := &proxy{t: t, target: target, addr: "127.0.0.1:0"}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start() {
	var l net.Listener
	var err error
	for range 50 { // the port may linger briefly after stop
		if l, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy listen: %v", err)
	}
	p.mu.Lock()
	p.l, p.addr = l, l.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// stop closes the listener and cuts every connection.
func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	dsn := testenv.MustDatabase(t)
	u, _ := url.Parse(dsn)
	px := startProxy(t, u.Host)
	u.Host = px.addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	e := newEnv(t, envOptions{dsn: u.String()})
	admin := e.login("admin")
	admin.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]string{"name": "shop"})
	tok := e.token(admin, sluice.RoleAdmin)
	tok.must(http.StatusOK, "GET", "/api/v1/namespaces", nil)

	px.stop()
	for _, path := range []string{"/api/v1/namespaces", "/api/v1/namespaces/shop/draft", "/api/v1/audit"} {
		r := tok.must(http.StatusServiceUnavailable, "GET", path, nil)
		if p := r.problem(t); p.Code != sluice.EUNAVAILABLE || p.Detail != "the database is unavailable" {
			t.Fatalf("%s: %+v", path, p)
		}
	}
	e.anon().must(http.StatusServiceUnavailable, "GET", "/readyz", nil)
	e.anon().must(http.StatusOK, "GET", "/healthz", nil)

	px.start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := tok.do("GET", "/api/v1/namespaces", nil)
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("did not recover: %d %s", r.status, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.waitReady()
}
