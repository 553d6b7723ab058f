package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/sluicegw/sluice/api"
	"github.com/sluicegw/sluice/dataplane/internal/rulegen"
	"github.com/sluicegw/sluice/dataplane/source"
)

// TestApplyNormalizesOnce checks that one Apply normalizes the rule set once
// (api.Validated), for a first load, a changed version and a re-publish:
// validation, checksum and every compiler share that one normalized copy.
// Not parallel: it counts the Normalize calls of the whole process.
func TestApplyNormalizesOnce(t *testing.T) {
	var docs [2][]byte
	for i := range docs {
		var err error
		if docs[i], err = json.Marshal(rulegen.Large(50, int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	node := New(Config{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	defer func() {
		if s := node.Current(); s != nil {
			s.Retire(nil)
		}
	}()
	for i, tc := range []struct {
		desc string
		doc  []byte
	}{
		{"first load", docs[0]},
		{"changed version", docs[1]},
		{"re-publish", docs[1]},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before := api.Normalizations()
			if err := node.Apply(context.Background(), source.Update{Data: tc.doc, Version: int64(i + 1), Source: "test"}); err != nil {
				t.Fatal(err)
			}
			if n := api.Normalizations() - before; n != 1 {
				t.Fatalf("Apply normalized %d times, want 1", n)
			}
		})
	}
}
