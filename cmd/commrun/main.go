package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gocomm/comm/launch"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	os.Exit(launch.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, signals))
}
