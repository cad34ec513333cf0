// Package varint reads encoding/binary's unsigned varints from a string,
// for readers that hand out slices of their input as strings (the object
// cache, the value codec) and would otherwise convert it to bytes first.
package varint

import "encoding/binary"

// Uvarint is binary.Uvarint over a string: the value and the bytes it
// took; n is 0 when s ends first, and -(bytes read) when the value
// overflows 64 bits.
func Uvarint(s string) (v uint64, n int) {
	var shift uint
	for i := 0; i < len(s); i++ {
		if i == binary.MaxVarintLen64 {
			return 0, -(i + 1) // overflow
		}
		c := s[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, -(i + 1) // overflow
			}
			return v | uint64(c)<<shift, i + 1
		}
		v |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}
