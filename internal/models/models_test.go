package models

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// The counts torchvision's resnet50 and bert-base-uncased's BertModel
// report (sum(p.numel() for p in model.parameters())).
func TestModelTotals(t *testing.T) {
	for _, tc := range []struct {
		m               Model
		tensors, params int
		first, last     Tensor
	}{
		{ResNet50(), 161, 25_557_032, Tensor{"conv1.weight", []int{64, 3, 7, 7}}, Tensor{"fc.bias", []int{1000}}},
		{BERTBase(), 199, 109_482_240, Tensor{"embeddings.word_embeddings.weight", []int{30522, 768}}, Tensor{"pooler.dense.bias", []int{768}}},
	} {
		if got := len(tc.m.Tensors); got != tc.tensors {
			t.Errorf("%s: %d tensors, want %d", tc.m.Name, got, tc.tensors)
		}
		if got := tc.m.Params(); got != tc.params {
			t.Errorf("%s: %d parameters, want %d", tc.m.Name, got, tc.params)
		}
		if got := tc.m.Tensors[0]; !reflect.DeepEqual(got, tc.first) {
			t.Errorf("%s: first tensor %v, want %v", tc.m.Name, got, tc.first)
		}
		if got := tc.m.Tensors[len(tc.m.Tensors)-1]; !reflect.DeepEqual(got, tc.last) {
			t.Errorf("%s: last tensor %v, want %v", tc.m.Name, got, tc.last)
		}
	}
}

// A few of ResNet-50's tensors by name: a stage's projection and its
// widest convolution.
func TestResNet50Shapes(t *testing.T) {
	want := map[string][]int{
		"layer1.0.downsample.0.weight": {256, 64, 1, 1},
		"layer2.0.conv1.weight":        {128, 256, 1, 1},
		"layer4.2.conv2.weight":        {512, 512, 3, 3},
		"layer4.2.bn3.weight":          {2048},
		"fc.weight":                    {1000, 2048},
	}
	seen := map[string]bool{}
	for _, ts := range ResNet50().Tensors {
		if seen[ts.Name] {
			t.Errorf("%s twice", ts.Name)
		}
		seen[ts.Name] = true
		if w, ok := want[ts.Name]; ok && !reflect.DeepEqual(ts.Shape, w) {
			t.Errorf("%s: %v, want %v", ts.Name, ts.Shape, w)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no %s", name)
		}
	}
}

func TestSmallTensors(t *testing.T) {
	m := SmallTensors(1000)
	if m.Name != NameSmall || len(m.Tensors) != 1000 {
		t.Fatalf("%s: %d tensors", m.Name, len(m.Tensors))
	}
	lo, hi := 1<<30, 0
	for _, ts := range m.Tensors {
		n := ts.Numel() * 4
		lo, hi = min(lo, n), max(hi, n)
	}
	if lo < 1024 || hi > 4096 || hi-lo < 2048 {
		t.Errorf("sizes %d-%d B, want spread over 1-4 KiB", lo, hi)
	}
	if !reflect.DeepEqual(m, SmallTensors(1000)) {
		t.Error("not deterministic")
	}
}

func TestByName(t *testing.T) {
	for _, name := range Names {
		m, err := ByName(name)
		if err != nil || m.Name != name {
			t.Errorf("ByName(%q) = %s, %v", name, m.Name, err)
		}
	}
	if _, err := ByName("vgg"); err == nil || !strings.Contains(err.Error(), "resnet50") {
		t.Errorf("ByName(vgg): %v", err)
	}
}

func TestShapesRoundTrip(t *testing.T) {
	for _, name := range Names {
		m, _ := ByName(name)
		var buf bytes.Buffer
		if err := WriteShapes(&buf, m); err != nil {
			t.Fatal(err)
		}
		got, err := ParseShapes(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: round trip differs", name)
		}
	}
}

func TestParseShapesErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"gocomm-plan 1\n",
		"gocomm-model 1\ntensor a\n",
		"gocomm-model 1\ntensor a 0\n",
		"gocomm-model 1\ntensor a x\n",
		"gocomm-model 1\nweights a 1\n",
	} {
		if _, err := ParseShapes(strings.NewReader(in)); err == nil {
			t.Errorf("ParseShapes(%q): no error", in)
		}
	}
}
