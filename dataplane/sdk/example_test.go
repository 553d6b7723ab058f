package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sluicegw/sluice/dataplane/sdk"
)

// A service guards its order creation per user with a rule document of kind
// service: the second call of one user within the minute is refused.
func Example() {
	dir, _ := os.MkdirTemp("", "sluice-sdk-example")
	defer os.RemoveAll(dir)
	rules := filepath.Join(dir, "rules.yaml")
	_ = os.WriteFile(rules, []byte(`namespace: orders-svc
kind: service
limits:
  - id: orders-per-user
    resources: [orders.Create]
    key: [sdk:user]
    algorithm: token_bucket
    rate: 1
    period: 1m
`), 0o600)

	ctx := context.Background()
	g, err := sdk.New(ctx, sdk.Config{Namespace: "orders-svc", RulesFile: rules, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()

	create := func(ctx context.Context) error { fmt.Println("order created"); return nil }
	for range 2 {
		err := g.Do(ctx, "orders.Create", sdk.Keys{"user": "alice"}, create)
		var rej *sdk.Rejected
		if errors.As(err, &rej) {
			fmt.Printf("refused by %s %s: %d, retry after %s\n", rej.Kind, rej.Rule, rej.Status, rej.RetryAfter)
		}
	}
	// Output:
	// order created
	// refused by limit orders-per-user: 429, retry after 1m0s
}
