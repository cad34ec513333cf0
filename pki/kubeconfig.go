package pki

import (
	"encoding/base64"
	"fmt"
	"time"
)

// AdminKubeconfig is a kubeconfig for the cluster's administrator
// (kubernetes-admin in kubeadm:cluster-admins, as kubeadm's admin.conf) at
// the control-plane endpoint host:port, trusting the cluster CA, with a
// client certificate the CA signed now.
func (c *Cluster) AdminKubeconfig(endpoint string, now time.Time) ([]byte, error) {
	client, err := c.Sign("kubernetes-admin", []string{"kubeadm:cluster-admins"}, nil, false, now)
	if err != nil {
		return nil, err
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	user := "kubernetes-admin@" + c.Cluster
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: https://%[2]s
    certificate-authority-data: %[3]s
users:
- name: %[4]s
  user:
    client-certificate-data: %[5]s
    client-key-data: %[6]s
contexts:
- name: %[4]s
  context:
    cluster: %[1]s
    user: %[4]s
current-context: %[4]s
`, c.Cluster, endpoint, b64(c.CA.Cert), user, b64(client.Cert), b64(client.Key)), nil
}
