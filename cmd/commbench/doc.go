// Command commbench measures gocomm's collectives as nccl-tests measures
// NCCL's: it sweeps message sizes for each op and prints, on rank 0, the
// size, count, type, redop, root, time, algbw, busbw and #wrong columns
// with nccl-tests' bus-bandwidth factors, and writes JSON, CSV and an SVG
// plot of busbw against size.
//
//	commbench -n 2 -b 8 -e 64M -f 2 --op allreduce --check
//	commrun -n 4 -- commbench --op all -e 16M --json out.json
//	commbench compare -n 2 --runs 3 --plot compare.svg
//	commbench ddp -n 2 --model resnet50,bert-base,small1000 --runs 3 --overlap
//
// Without a launcher it starts -n ranks of itself on this host; under
// commrun, torchrun or mpirun it joins their world. "commbench compare"
// runs the same sweep for gocomm, Open MPI and torch.distributed's gloo
// side by side and prints the ratios; "commbench ddp" times data-parallel
// gradient reduction (per-tensor all-reduces, ddp.Reducer, one flat
// all-reduce, torch DDP on gloo) for real models' gradient lists. Run commbench -h (and commbench
// compare -h) for every flag; the logic is package bench. Built with
// -tags mpi (and cgo), --backend mpi measures gocomm's MPI backend under
// mpirun.
//
// Who may import it: nobody (a command). It imports package bench (which
// holds the logic) and holds flags only.
package main
