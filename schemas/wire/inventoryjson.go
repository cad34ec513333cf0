package wire

import (
	"encoding/json"
	"strconv"
)

// A worker encodes its whole provider's machines every minute: at 130,000
// machines, 130 parts of 1,000, which encoding/json's reflection took
// ~0.35 s of CPU to write beside the commits a daemon takes meanwhile.
// appendInventory writes the same bytes as encoding/json's Marshal of an
// Inventory (its fields in order, omitempty as tagged, maps' keys sorted,
// strings escaped as Marshal escapes them: a string that is not plain goes
// to Marshal itself); TestEncodeInventoryIsEncodingJSON and
// FuzzEncodeInventory hold it to that.

// appendInventory appends inv's encoding to b; false means a value it
// does not write (a time Marshal refuses): the caller uses Marshal.
func appendInventory(b []byte, inv *Inventory) ([]byte, bool) {
	b = append(b, `{"apiVersion":`...)
	b = appendString(b, inv.APIVersion)
	b = append(b, `,"provider":`...)
	b = appendString(b, inv.Provider)
	b = append(b, `,"worker":`...)
	b = appendString(b, inv.Worker)
	if inv.HostBound {
		b = append(b, `,"hostBound":true`...)
	}
	b = append(b, `,"report":`...)
	b = appendString(b, inv.Report)
	b = append(b, `,"part":`...)
	b = strconv.AppendInt(b, int64(inv.Part), 10)
	b = append(b, `,"parts":`...)
	b = strconv.AppendInt(b, int64(inv.Parts), 10)
	if inv.Request != "" {
		b = append(b, `,"request":`...)
		b = appendString(b, inv.Request)
	}
	t, err := inv.Time.MarshalJSON()
	if err != nil {
		return nil, false
	}
	b = append(append(b, `,"time":`...), t...)
	if len(inv.Instances) > 0 {
		b = append(b, `,"instances":[`...)
		for i := range inv.Instances {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendInstance(b, &inv.Instances[i])
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

func appendInstance(b []byte, in *Instance) []byte {
	b = append(b, `{"cluster":`...)
	b = appendString(b, in.Cluster)
	b = append(b, `,"machine":`...)
	b = appendString(b, in.Machine)
	for _, f := range [...]struct{ key, v string }{{`,"deployment":`, in.Deployment}, {`,"role":`, string(in.Role)},
		{`,"version":`, in.Version}, {`,"templateHash":`, in.TemplateHash}} {
		if f.v != "" {
			b = appendString(append(b, f.key...), f.v)
		}
	}
	if len(in.Labels) > 0 {
		b = appendStringMap(append(b, `,"labels":`...), in.Labels)
	}
	if len(in.Annotations) > 0 {
		b = appendStringMap(append(b, `,"annotations":`...), in.Annotations)
	}
	if in.ProviderID != "" {
		b = appendString(append(b, `,"providerID":`...), in.ProviderID)
	}
	if len(in.Addresses) > 0 {
		b = append(b, `,"addresses":[`...)
		for i, a := range in.Addresses {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, a)
		}
		b = append(b, ']')
	}
	if in.Reason != "" {
		b = appendString(append(b, `,"reason":`...), in.Reason)
	}
	if in.Message != "" {
		b = appendString(append(b, `,"message":`...), in.Message)
	}
	return append(b, '}')
}

// appendStringMap writes a map of strings with its keys sorted.
func appendStringMap(b []byte, m map[string]string) []byte {
	var buf [16]string
	b = append(b, '{')
	for i, k := range sortedKeys(buf[:0], m) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(append(appendString(b, k), ':'), m[k])
	}
	return append(b, '}')
}

// appendString writes s as Marshal does.
func appendString(b []byte, s string) []byte {
	if plainString(s) {
		return appendPlain(b, s)
	}
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}
