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
	flag.BoolVar(&cfg.elastic, "elastic", false, "survive the loss of ranks and grow back as replacements join (elastic.Run; -optim sgd; run under commrun --elastic MIN:MAX)")
	flag.DurationVar(&cfg.joinWait, "join-wait", cfg.joinWait, "with -elastic: how long a world smaller than the job's waits at the end for replacements to join")
	flag.BoolVar(&cfg.logSteps, "log-steps", false, "with -elastic: rank 0 prints a line per step")
	flag.BoolVar(&cfg.reducer, "reducer", cfg.reducer, "reduce gradients through a ddp.Reducer, layer by layer as backward produces them (false: one all-reduce of the whole gradient after backward)")
	flag.BoolVar(&cfg.overlap, "overlap", cfg.overlap, "with the Reducer: start each bucket as soon as its gradients are ready (false: only once backward has finished)")
	flag.IntVar(&cfg.bucketKB, "bucket-kb", cfg.bucketKB, "with the Reducer: bucket cap in KiB (DDP's default is 25600)")
	flag.IntVar(&cfg.zero, "zero", cfg.zero, "ZeRO stage: 0 (none), 1 (Adam's state partitioned) or 2 (gradients reduce-scattered too); implies -optim adam")
	flag.Parse()
	cfg.flagsGiven = map[string]bool{}
	flag.Visit(func(f *flag.Flag) { cfg.flagsGiven[f.Name] = true })
	if cfg.zero > 0 && !cfg.flagsGiven["optim"] {
		cfg.optim = optimAdam
	}
	os.Exit(run(context.Background(), cfg, os.Stdout, os.Stderr))
}
