// Command train is data-parallel training with gocomm: a small multi-layer
// perceptron learns a synthetic classification problem that every rank
// generates deterministically, each rank on its shard, with the gradients
// averaged by an all-reduce every step.
//
// Run it as is and it starts 4 ranks of itself on this host (TCP store on
// 127.0.0.1, native backend):
//
//	go run ./examples/train
//
// The same binary runs unchanged under a launcher, which then decides the
// number of ranks:
//
//	go build -o train ./examples/train
//	commrun -n 4 -- ./train
//	mpirun -np 4 ./train
//	torchrun --nproc_per_node 2 --no_python ./train
//
// Rank 0 prints a line per epoch (loss, accuracy, samples/s), checks that
// every rank ends with the same parameters, prints a table of the time spent
// in collectives and a final line with a checksum of the parameters, equal
// for runs with the same world size and flags under any launcher.
package main

import (
	"context"
	"flag"
	"os"
)

func main() {
	cfg := defaultConfig()
	flag.IntVar(&cfg.procs, "n", cfg.procs, "ranks to start on this host when no launcher started this program")
	flag.IntVar(&cfg.epochs, "epochs", cfg.epochs, "passes over the training set")
	flag.IntVar(&cfg.batch, "batch", cfg.batch, "samples per rank per step")
	flag.Float64Var(&cfg.lr, "lr", cfg.lr, "learning rate (SGD with momentum 0.9)")
	flag.IntVar(&cfg.hidden, "hidden", cfg.hidden, "hidden units (0: softmax regression)")
	flag.IntVar(&cfg.samples, "samples", cfg.samples, "training samples (plus a quarter as many for testing)")
	flag.Uint64Var(&cfg.seed, "seed", cfg.seed, "seed of the data set and the initial weights")
	flag.DurationVar(&cfg.timeout, "timeout", cfg.timeout, "bound of the rendezvous and of every collective")
	flag.BoolVar(&cfg.profile, "profile", cfg.profile, "comms logger: print its summary and straggler report at the end")
	flag.StringVar(&cfg.traceDir, "trace-dir", "", "with -profile: write a Chrome/Perfetto trace per rank here (merge with commtrace)")
	flag.Parse()
	os.Exit(run(context.Background(), cfg, os.Stdout, os.Stderr))
}
