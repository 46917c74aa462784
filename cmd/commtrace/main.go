package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/gocomm/comm/profile"
)

func main() {
	out := flag.String("o", "-", "where to write the merged trace (- for standard output)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: commtrace [-o merged.json] dir-or-trace.json...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var buf bytes.Buffer
	err := profile.MergeTraceFiles(&buf, flag.Args())
	if err == nil {
		if *out == "-" {
			_, err = os.Stdout.Write(buf.Bytes())
		} else {
			err = os.WriteFile(*out, buf.Bytes(), 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "commtrace:", err)
		os.Exit(1)
	}
}
