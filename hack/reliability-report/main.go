// Command reliability-report adds a figure to the reliability report, or prints the report as a
// table (make test-reliability):
//
//	reliability-report add FILE SUITE WHAT VALUE
//	reliability-report table FILE
package main

import (
	"fmt"
	"os"

	"github.com/nexo-io/nexo-edge/test/framework/reliabilityreport"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "reliability-report:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 5 && args[0] == "add":
		return reliabilityreport.Append(args[1], reliabilityreport.Row{Suite: args[2], What: args[3], Value: args[4]})
	case len(args) == 2 && args[0] == "table":
		f, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		rows, err := reliabilityreport.Read(f)
		if err != nil {
			return err
		}
		reliabilityreport.Table(os.Stdout, rows)
		return nil
	}
	return fmt.Errorf("usage: reliability-report add FILE SUITE WHAT VALUE | table FILE")
}
