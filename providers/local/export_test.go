package local

// NewWithoutPidfd is New with adopted nodes watched as where the kernel
// gives no pidfd: looked at every pollEvery.
func NewWithoutPidfd(o Options) (*Provider, error) {
	p, err := New(o)
	if err != nil {
		return nil, err
	}
	p.noPidfd = true
	return p, nil
}
