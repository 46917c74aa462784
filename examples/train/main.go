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
	flag.Var(&cfg.optim, "optim", "optimizer: sgd (momentum 0.9), adam, or onebitadam (1-bit Adam: compressed momentum all-reduce after -freeze-step steps)")
	flag.IntVar(&cfg.freezeStep, "freeze-step", cfg.freezeStep, "with -optim onebitadam: warm-up steps of exact Adam before compressing (0: DeepSpeed's default, 100000)")
	flag.Float64Var(&cfg.lr, "lr", cfg.lr, "learning rate (0: 0.05 for sgd, 1e-3 for adam and onebitadam)")
	flag.IntVar(&cfg.hidden, "hidden", cfg.hidden, "units per hidden layer (0: softmax regression)")
	flag.IntVar(&cfg.layers, "layers", cfg.layers, "hidden layers (0: softmax regression)")
	flag.IntVar(&cfg.samples, "samples", cfg.samples, "training samples (plus a quarter as many for testing)")
	flag.Uint64Var(&cfg.seed, "seed", cfg.seed, "seed of the data set and the initial weights")
	flag.DurationVar(&cfg.timeout, "timeout", cfg.timeout, "bound of the rendezvous and of every collective")
	flag.BoolVar(&cfg.profile, "profile", cfg.profile, "comms logger: print its summary and straggler report at the end")
	flag.StringVar(&cfg.traceDir, "trace-dir", "", "with -profile: write a Chrome/Perfetto trace per rank here (merge with commtrace)")
	flag.BoolVar(&cfg.shrink, "shrink", false, "survive the loss of ranks: the others shrink the world past them and train on (-optim sgd; run under commrun -keep-going)")
	flag.Parse()
	cfg.flagsGiven = map[string]bool{}
	flag.Visit(func(f *flag.Flag) { cfg.flagsGiven[f.Name] = true })
	os.Exit(run(context.Background(), cfg, os.Stdout, os.Stderr))
}
