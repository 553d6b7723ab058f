// Command sluice-admin is the Sluice control plane: the admin REST API and
// console over versioned, reviewed rule sets in Postgres, published to etcd.
//
// This build is a placeholder until the control plane lands; it only reports
// that it is not implemented yet.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "sluice-admin: the control plane is not built yet; run sluice-gateway --rules FILE on its own")
	os.Exit(2)
}
