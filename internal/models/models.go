package models

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A Tensor is one parameter: its name in the framework's state dict and
// its shape.
type Tensor struct {
	Name  string
	Shape []int
}

// Numel is the tensor's element count.
func (t Tensor) Numel() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// A Model is a named list of parameter tensors in registration order.
type Model struct {
	Name    string
	Tensors []Tensor
}

// Params is the model's total element count.
func (m Model) Params() int {
	var n int
	for _, t := range m.Tensors {
		n += t.Numel()
	}
	return n
}

// Shapes is the list of shapes, in order (what a gradient reducer is
// built from).
func (m Model) Shapes() [][]int {
	s := make([][]int, len(m.Tensors))
	for i, t := range m.Tensors {
		s[i] = t.Shape
	}
	return s
}

// Names of the built-in models, for ByName.
const (
	NameResNet50 = "resnet50"
	NameBERTBase = "bert-base"
	NameSmall    = "small1000"
)

// Names lists ByName's models.
var Names = []string{NameResNet50, NameBERTBase, NameSmall}

// ByName returns one of the built-in models.
func ByName(name string) (Model, error) {
	switch name {
	case NameResNet50:
		return ResNet50(), nil
	case NameBERTBase:
		return BERTBase(), nil
	case NameSmall:
		return SmallTensors(1000), nil
	}
	return Model{}, fmt.Errorf("models: unknown model %q (want one of %s)", name, strings.Join(Names, ", "))
}

// builder appends tensors under a name prefix.
type builder struct{ ts []Tensor }

func (b *builder) add(name string, shape ...int) { b.ts = append(b.ts, Tensor{name, shape}) }

// conv2d adds a bias-free convolution's weight (out, in, k, k), as
// torchvision's ResNet builds them.
func (b *builder) conv2d(name string, in, out, k int) { b.add(name+".weight", out, in, k, k) }

// batchNorm adds a batch norm's affine weight and bias (its running
// statistics are buffers, not parameters).
func (b *builder) batchNorm(name string, c int) {
	b.add(name+".weight", c)
	b.add(name+".bias", c)
}

// linear adds a linear layer's weight (out, in) and bias (out).
func (b *builder) linear(name string, in, out int) {
	b.add(name+".weight", out, in)
	b.add(name+".bias", out)
}

// ResNet50 is torchvision's resnet50 (He et al. 2015, v1.5: the stride on
// the 3x3 convolution, which does not change the shapes) for 1000
// classes: a 7x7 stem, four stages of 3, 4, 6 and 3 bottleneck blocks of
// widths 64-512 (expansion 4, a 1x1 projection on each stage's first
// block), and the classifier: 161 tensors, 25,557,032 parameters.
func ResNet50() Model {
	var b builder
	b.conv2d("conv1", 3, 64, 7)
	b.batchNorm("bn1", 64)
	in := 64
	for s, blocks := range []int{3, 4, 6, 3} {
		width := 64 << s
		out := width * 4
		for k := range blocks {
			p := fmt.Sprintf("layer%d.%d.", s+1, k)
			b.conv2d(p+"conv1", in, width, 1)
			b.batchNorm(p+"bn1", width)
			b.conv2d(p+"conv2", width, width, 3)
			b.batchNorm(p+"bn2", width)
			b.conv2d(p+"conv3", width, out, 1)
			b.batchNorm(p+"bn3", out)
			if k == 0 {
				b.conv2d(p+"downsample.0", in, out, 1)
				b.batchNorm(p+"downsample.1", out)
			}
			in = out
		}
	}
	b.linear("fc", 2048, 1000)
	return Model{Name: NameResNet50, Tensors: b.ts}
}

// BERTBase is bert-base-uncased's BertModel (Devlin et al. 2018): a
// 30,522-token vocabulary, 512 positions, 2 token types, hidden size 768,
// 12 layers of 12-head self-attention and a 3072-wide feed-forward, and
// the pooler: 199 tensors, 109,482,240 parameters (the MLM head's
// decoder is tied to the word embeddings, so it adds no tensor).
func BERTBase() Model {
	const vocab, positions, types, hidden, ffn, layers = 30522, 512, 2, 768, 3072, 12
	var b builder
	b.add("embeddings.word_embeddings.weight", vocab, hidden)
	b.add("embeddings.position_embeddings.weight", positions, hidden)
	b.add("embeddings.token_type_embeddings.weight", types, hidden)
	b.add("embeddings.LayerNorm.weight", hidden)
	b.add("embeddings.LayerNorm.bias", hidden)
	for l := range layers {
		p := fmt.Sprintf("encoder.layer.%d.", l)
		b.linear(p+"attention.self.query", hidden, hidden)
		b.linear(p+"attention.self.key", hidden, hidden)
		b.linear(p+"attention.self.value", hidden, hidden)
		b.linear(p+"attention.output.dense", hidden, hidden)
		b.add(p+"attention.output.LayerNorm.weight", hidden)
		b.add(p+"attention.output.LayerNorm.bias", hidden)
		b.linear(p+"intermediate.dense", hidden, ffn)
		b.linear(p+"output.dense", ffn, hidden)
		b.add(p+"output.LayerNorm.weight", hidden)
		b.add(p+"output.LayerNorm.bias", hidden)
	}
	b.linear("pooler.dense", hidden, hidden)
	return Model{Name: NameBERTBase, Tensors: b.ts}
}

// SmallTensors is n one-dimensional tensors of 256 to 1024 float32
// elements (1-4 KiB) each, sizes spread by a fixed hash of the index so
// that every run and every peer gets the same list.
func SmallTensors(n int) Model {
	var b builder
	for i := range n {
		b.add(fmt.Sprintf("small.%d", i), 256+int(mix32(uint32(i))%769))
	}
	name := NameSmall
	if n != 1000 {
		name = fmt.Sprintf("small%d", n)
	}
	return Model{Name: name, Tensors: b.ts}
}

// mix32 is MurmurHash3's 32-bit finaliser.
func mix32(x uint32) uint32 {
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	return x ^ x>>16
}

const shapesHeader = "gocomm-model 1"

// WriteShapes writes m as text: a header line, "model NAME", then one
// line per tensor, "tensor NAME D0 D1 ...".
func WriteShapes(w io.Writer, m Model) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s\nmodel %s\n", shapesHeader, m.Name)
	for _, t := range m.Tensors {
		bw.WriteString("tensor " + t.Name)
		for _, d := range t.Shape {
			bw.WriteString(" " + strconv.Itoa(d))
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// ParseShapes reads what WriteShapes wrote.
func ParseShapes(r io.Reader) (Model, error) {
	sc := bufio.NewScanner(r)
	var m Model
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		switch {
		case line == 1:
			if sc.Text() != shapesHeader {
				return m, fmt.Errorf("models: line 1: not a model file (want %q)", shapesHeader)
			}
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case f[0] == "model" && len(f) == 2:
			m.Name = f[1]
		case f[0] == "tensor" && len(f) >= 3:
			t := Tensor{Name: f[1]}
			for _, s := range f[2:] {
				d, err := strconv.Atoi(s)
				if err != nil || d < 1 {
					return m, fmt.Errorf("models: line %d: bad dimension %q", line, s)
				}
				t.Shape = append(t.Shape, d)
			}
			m.Tensors = append(m.Tensors, t)
		default:
			return m, fmt.Errorf("models: line %d: bad line %q", line, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("models: %w", err)
	}
	if line == 0 {
		return m, fmt.Errorf("models: empty model file")
	}
	return m, nil
}
