// Command etcd is the upstream etcd server, built from the Go module proxy so
// the test cluster needs no download site.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
