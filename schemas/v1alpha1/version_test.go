package v1alpha1

import "testing"

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]*Version{
		"v1.30.2":                   {1, 30, 2},
		"v0.0.0":                    {0, 0, 0},
		"v10.200.3000":              {10, 200, 3000},
		"v1.30.2-rc.1":              {1, 30, 2},
		"v1.30.2+build.5":           {1, 30, 2},
		"v1.30.2-rc.1+b":            {1, 30, 2},
		"v01.02.03":                 {1, 2, 3},
		"1.30.2":                    nil,
		"v1.30":                     nil,
		"v1.30.2.1":                 nil,
		"v1.30.2.":                  nil,
		"v1..2":                     nil,
		"v.1.2":                     nil,
		"v1.a.2":                    nil,
		"v":                         nil,
		"":                          nil,
		"v-1.2.3":                   nil,
		"v+1.2.3":                   nil,
		"v1.2.3 ":                   nil,
		"v1.2.3_4":                  nil,
		"v99999999999999999999.1.1": nil,
		"V1.2.3":                    nil,
	} {
		got, ok := ParseVersion(in)
		if ok != (want != nil) || want != nil && got != *want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
}
