package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gocomm/comm"
	"github.com/gocomm/comm/bench"
	"github.com/gocomm/comm/launch"
)

func main() {
	cfg := config{procs: 2, size: 64 << 20, runs: 5, warmup: 1}
	flag.IntVar(&cfg.procs, "n", cfg.procs, "ranks to start on this host when no launcher started this program")
	size := flag.String("size", "64M", "bytes of float32 per rank (K, M, G: powers of 1024)")
	flag.IntVar(&cfg.runs, "runs", cfg.runs, "timed runs of each all-reduce (the median is reported)")
	flag.IntVar(&cfg.warmup, "warmup", cfg.warmup, "untimed runs of each all-reduce first")
	flag.StringVar(&cfg.label, "label", "this host", "what to call the link in the result line")
	flag.Parse()
	s, err := bench.ParseSize(*size)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.size = s
	os.Exit(run(context.Background(), cfg, os.Stdout, os.Stderr))
}

// run launches the ranks if no launcher did, then measures as one of them.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) int {
	parent, err := launch.SpawnConfig(ctx, launch.Config{NProcs: cfg.procs, Stdout: stdout, Stderr: stderr, Name: "slowlink"})
	if parent {
		if err != nil {
			fmt.Fprintln(stderr, err)
			var je *launch.JobError
			if errors.As(err, &je) {
				return je.ExitCode()
			}
			return 1
		}
		return 0
	}
	c, err := comm.Init(ctx, comm.Options{Timeout: 10 * time.Minute})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer c.Close()
	res, err := compare(ctx, c, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "rank %d: %v\n", c.Rank(), err)
		c.Abort(err)
		return 1
	}
	if c.Rank() == 0 {
		writeResult(stdout, cfg, res)
	}
	return 0
}
