package wire

import "fmt"

// SubjectJoin is where a control plane asks the leader to review a
// joining machine's bootstrap token: gitfleet.join.<cluster>.<reviewer>,
// a request whose reply is a JoinVerdict (docs/bootstrap.md). A node's
// credentials let it ask for its own cluster only, as itself.
const SubjectJoin = "gitfleet.join"

// JoinSubject is the review subject of reviewer (a control-plane machine,
// or a provider name for providers whose machines have no network) in
// cluster.
func JoinSubject(cluster, reviewer string) string {
	return SubjectJoin + "." + cluster + "." + reviewer
}

// NodeInboxPrefix is the inbox a node receives replies on: the only
// subjects its credentials let it subscribe to.
func NodeInboxPrefix(cluster, machine string) string {
	return "_INBOX_node." + cluster + "." + machine
}

// JoinReview asks whether Node may join Cluster with the token whose ID
// is TokenID and whose secret hashes (SHA-256, hex) to SecretHash. The
// secret itself never travels on NATS.
type JoinReview struct {
	APIVersion string `json:"apiVersion"`
	Cluster    string `json:"cluster"`
	Node       string `json:"node"`
	TokenID    string `json:"tokenID"`
	SecretHash string `json:"secretHash"`
}

// JoinVerdict answers a JoinReview: Joined, or refused for Reason. Retry
// says the refusal is the daemon's trouble (asking again may work), not
// the token's.
type JoinVerdict struct {
	APIVersion string `json:"apiVersion"`
	Joined     bool   `json:"joined"`
	Reason     string `json:"reason,omitempty"`
	Retry      bool   `json:"retry,omitempty"`
}

// DecodeJoinReview parses and checks a review.
func DecodeJoinReview(data []byte) (JoinReview, error) {
	var r JoinReview
	if err := decode(data, &r); err != nil {
		return JoinReview{}, err
	}
	if r.Cluster == "" || r.Node == "" || r.TokenID == "" || r.SecretHash == "" {
		return JoinReview{}, fmt.Errorf("%w: a join review needs cluster, node, tokenID and secretHash", ErrMalformed)
	}
	return r, nil
}

// DecodeJoinVerdict parses a verdict.
func DecodeJoinVerdict(data []byte) (JoinVerdict, error) {
	var v JoinVerdict
	if err := decode(data, &v); err != nil {
		return JoinVerdict{}, err
	}
	return v, nil
}
