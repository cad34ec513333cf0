// Package clientaddr names the client of an HTTP request for limits that
// count per client (the dashboard's wrong passwords, the webhook's places):
// its IP, or its /64 for IPv6, where one host commonly holds a whole /64
// and could otherwise take a fresh address for each request.
package clientaddr

import (
	"net"
	"net/netip"
)

// Of is the client a request's RemoteAddr (host:port) is counted as: the
// IP, or the /64 that holds it for IPv6 (an IPv4 address written as IPv6,
// ::ffff:192.0.2.1, stays itself). Behind a reverse proxy every client
// has the proxy's address. A RemoteAddr that is no IP is returned as it
// is.
func Of(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Is4() || ip.Is4In6() {
		return host
	}
	prefix, _ := ip.Prefix(64)
	return prefix.String()
}
