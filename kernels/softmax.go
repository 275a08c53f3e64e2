package kernels

// softmaxImpl is llama2.c's softmax:
//
//	mx := x[0]; for _, v := range x[1:] { if v > mx { mx = v } }
//	var sum float32
//	for i, v := range x { x[i] = float32(math.Exp(float64(v - mx))); sum += x[i] }
//	for i := range x { x[i] /= sum }
var softmaxImpl = softmaxGeneric

// Softmax replaces x by exp(x-max)/Σexp(x-max) in place. An empty x is left
// alone; a NaN anywhere makes every output NaN.
func Softmax(x []float32) { softmaxImpl(x) }

// siluImpl is llama2.c's activation: x[i] = v * (1 / (1 + float32(math.Exp(float64(-v))))).
var siluImpl = siluGeneric

// SiLU applies x*sigmoid(x) in place.
func SiLU(x []float32) { siluImpl(x) }
