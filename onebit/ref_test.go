package onebit_test

import "math"

// refWorld is an independent, straightforward transcription of §6.2 of
// DeepSpeed's compressed_allreduce (shared/reference/deepspeed-comm.md)
// for all ranks at once: no packing, no kernels, one element at a time.
type refWorld struct {
	n           int
	workerError [][]float32 // per rank, W values
	serverError [][]float32 // per rank, W/N values
}

func newRefWorld(n, w int) *refWorld {
	r := &refWorld{n: n}
	for range n {
		r.workerError = append(r.workerError, make([]float32, w))
		r.serverError = append(r.serverError, make([]float32, w/n))
	}
	return r
}

// refNorm is the reproducible RMS of §6.4.
func refNorm(v []float32) float32 {
	var s float64
	for _, x := range v {
		sq := float64(x) * float64(x)
		s = s + sq
	}
	return float32(math.Sqrt(s)) / float32(math.Sqrt(float64(len(v))))
}

// refSign is +1 unless x < 0.
func refSign(x float32) float32 {
	if x < 0 {
		return -1
	}
	return 1
}

// step runs one compressed all-reduce of xs (one slice per rank, each of
// length L) and returns the result every rank gets (L values).
func (r *refWorld) step(xs [][]float32) []float32 {
	n, w := r.n, len(r.workerError[0])
	c := w / n
	signs := make([][]float32, n)
	scales := make([]float32, n)
	for k := range n {
		b := make([]float32, w) // the padded buffer: zeros past L
		copy(b, xs[k])
		for i := range b {
			b[i] = b[i] + r.workerError[k][i]
		}
		scales[k] = refNorm(b)
		signs[k] = make([]float32, w)
		for i := range b {
			signs[k][i] = refSign(b[i])
			prod := scales[k] * signs[k][i]
			r.workerError[k][i] = b[i] - prod
		}
	}
	inv := float32(1.0 / float64(n))
	serverSigns := make([][]float32, n)
	serverScales := make([]float32, n)
	for k := range n { // rank k serves elements [k*c, (k+1)*c)
		m := make([]float32, c)
		for i := range m {
			var acc float32
			for j := range n {
				t := scales[j] * inv
				term := signs[j][k*c+i] * t
				acc = acc + term
			}
			m[i] = acc + r.serverError[k][i]
		}
		serverScales[k] = refNorm(m)
		serverSigns[k] = make([]float32, c)
		for i := range m {
			serverSigns[k][i] = refSign(m[i])
			prod := serverScales[k] * serverSigns[k][i]
			r.serverError[k][i] = m[i] - prod
		}
	}
	out := make([]float32, len(xs[0]))
	for i := range out {
		j := i / c
		out[i] = serverScales[j] * serverSigns[j][i-j*c]
	}
	return out
}
