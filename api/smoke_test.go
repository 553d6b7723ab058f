package api

import (
	"os"
	"testing"
)

func TestSmokeDemo(t *testing.T) {
	b, err := os.ReadFile("../deploy/rules/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Log(string(rs.Canonical()), rs.Checksum())
	_, err = Decode([]byte("namespace: x\nroutes:\n  - id: a\n    matsh: {}\n    upstream: {targets: [{url: 3}]}\nnamespace: y\n"))
	t.Log(err)
	_, err = Decode([]byte("namespace: x\nroutes:\n  - id: a\n    matsh: {}\n    upstream: {targets: [{url: 3, wieght: x}]}\n"))
	t.Log(err)
	_, err = Decode([]byte(`{"namespace":"x","routes":[{"id":"a","id":"b"}]}`))
	t.Log(err)
}
