package varint

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// TestUvarintIsBinarys: the same value and length as binary.Uvarint for
// every encoding of boundary values, each cut short, and random bytes.
func TestUvarintIsBinarys(t *testing.T) {
	var inputs [][]byte
	for _, v := range []uint64{0, 1, 127, 128, 255, 16383, 16384, 1 << 31, 1<<32 - 1, 1 << 56, math.MaxInt64, math.MaxUint64} {
		b := binary.AppendUvarint(nil, v)
		for n := 0; n <= len(b); n++ {
			inputs = append(inputs, b[:n])
		}
		inputs = append(inputs, append(b, 0x7f))
	}
	inputs = append(inputs, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02},
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.Uint32())
			if r.IntN(3) > 0 {
				b[i] |= 0x80
			}
		}
		inputs = append(inputs, b)
	}
	for _, b := range inputs {
		wv, wn := binary.Uvarint(b)
		if v, n := Uvarint(string(b)); v != wv || n != wn {
			t.Fatalf("Uvarint(%x) = %d, %d; binary.Uvarint: %d, %d", b, v, n, wv, wn)
		}
	}
}
