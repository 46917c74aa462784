// Package models holds the gradient shapes of reference networks, for
// benchmarks of data-parallel gradient reduction: ResNet-50 as torchvision
// builds it, BERT-base as bert-base-uncased is published, and a list of
// many small tensors. A Model is its parameter tensors in registration
// order (torch's Module.parameters() order), so a backward pass produces
// their gradients roughly in reverse.
//
// The shapes are derived from the architectures, not loaded from any
// framework; the tests pin the tensor counts and parameter totals that
// torchvision and the Hugging Face model card report.
//
// WriteShapes and ParseShapes are the text form the benchmark's Python
// peer reads (internal/bench/peers/ddp_bench.py), so both sides build the
// same list.
package models
