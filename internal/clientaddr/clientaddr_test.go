package clientaddr

import "testing"

// An IPv6 client is its /64, whatever its address in it and its zone; an
// IPv4 one (also written as IPv6) is its address; the port never counts.
func TestOf(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:5000":                       "192.0.2.7",
		"[::ffff:192.0.2.7]:5000":              "::ffff:192.0.2.7",
		"[2001:db8:1:2::1]:443":                "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff:ffff:ffff]:1": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:443":                "2001:db8:1:3::/64",
		"[fe80::1%eth0]:80":                    "fe80::/64",
		"@":                                    "@", // a Unix socket's
	} {
		if got := Of(remote); got != want {
			t.Errorf("Of(%q) = %q, want %q", remote, got, want)
		}
	}
}
